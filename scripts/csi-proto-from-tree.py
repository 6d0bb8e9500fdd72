#!/usr/bin/env python3
"""The CSI API (spec v1.2.0, the version the v1.20.2 kubelet speaks) as a .proto file, from
the tree the control plane is built from: the Go bindings vendored there
(vendor/github.com/container-storage-interface/spec/lib/go/csi/csi.pb.go) carry the spec's
compiled FileDescriptorProto; this decodes it and prints its messages, enums and services.
The spec's custom field options (csi_secret, alpha_field, ...) are annotations for
generators and are left out; comments are not in a descriptor.

    scripts/csi-proto-from-tree.py TREE > kubelet-cm/proto/csi/v1/csi.proto
"""
import gzip
import re
import sys

TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
         7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
         16: "sfixed64", 17: "sint32", 18: "sint64"}


def varint(b, i):
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def fields(b):
    """(number, value) of every field of one message; length-delimited values as bytes."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.append((num, v))
    return out


def get(fs, num, default=None):
    for n, v in fs:
        if n == num:
            return v
    return default


def all_of(fs, num):
    return [v for n, v in fs if n == num]


def enum(b, indent):
    fs = fields(b)
    lines = ["%senum %s {" % (indent, get(fs, 1).decode())]
    for v in all_of(fs, 2):
        vf = fields(v)
        lines.append("%s  %s = %d;" % (indent, get(vf, 1).decode(), get(vf, 2, 0)))
    lines.append("%s}" % indent)
    return lines


def field_type(ff):
    t = get(ff, 5)
    if t in (11, 14):
        name = get(ff, 6).decode()
        return name[len(".csi.v1."):] if name.startswith(".csi.v1.") else name.lstrip(".")
    return TYPES[t]


def message(b, indent, maps):
    fs = fields(b)
    name = get(fs, 1).decode()
    lines = ["%smessage %s {" % (indent, name)]
    inner = indent + "  "
    nested = {}
    for n in all_of(fs, 3):
        nf = fields(n)
        opts = get(nf, 7)
        if opts is not None and get(fields(opts), 7) == 1:
            kv = {get(fields(f), 1).decode(): fields(f) for f in all_of(nf, 2)}
            nested[get(nf, 1).decode()] = (field_type(kv["key"]), field_type(kv["value"]))
        else:
            lines += message(n, inner, maps)
    for e in all_of(fs, 4):
        lines += enum(e, inner)
    oneofs = [get(fields(o), 1).decode() for o in all_of(fs, 8)]
    by_oneof = {}
    plain = []
    for f in all_of(fs, 2):
        ff = fields(f)
        idx = get(ff, 9)
        if idx is not None and get(ff, 17) != 1:
            by_oneof.setdefault(idx, []).append(ff)
        else:
            plain.append(ff)
    def line(ff, ind):
        t = field_type(ff)
        label = "repeated " if get(ff, 4) == 3 else ""
        short = t.split(".")[-1]
        if label and short in nested and t.endswith(name + "." + short):
            k, v = nested[short]
            return "%smap<%s, %s> %s = %d;" % (ind, k, v, get(ff, 1).decode(), get(ff, 3))
        if label and t in nested:
            k, v = nested[t]
            return "%smap<%s, %s> %s = %d;" % (ind, k, v, get(ff, 1).decode(), get(ff, 3))
        return "%s%s%s %s = %d;" % (ind, label, t, get(ff, 1).decode(), get(ff, 3))
    items = [(get(ff, 3), [line(ff, inner)]) for ff in plain]
    for idx, members in by_oneof.items():
        block = ["%soneof %s {" % (inner, oneofs[idx])]
        block += [line(ff, inner + "  ") for ff in members]
        block.append("%s}" % inner)
        items.append((min(get(ff, 3) for ff in members), block))
    for _, block in sorted(items, key=lambda x: x[0]):
        lines += block
    lines.append("%s}" % indent)
    return lines


def service(b):
    fs = fields(b)
    lines = ["service %s {" % get(fs, 1).decode()]
    for m in all_of(fs, 2):
        mf = fields(m)
        strip = lambda s: s.decode()[len(".csi.v1."):]
        lines.append("  rpc %s(%s%s) returns (%s%s) {}" % (
            get(mf, 1).decode(), "stream " if get(mf, 5) == 1 else "", strip(get(mf, 2)),
            "stream " if get(mf, 6) == 1 else "", strip(get(mf, 3))))
    lines.append("}")
    return lines


def main():
    tree = sys.argv[1]
    src = open(tree + "/vendor/github.com/container-storage-interface/spec/lib/go/csi/csi.pb.go").read()
    body = re.search(r"var fileDescriptor_\w+ = \[\]byte\{(.*?)\n\}", src, re.S).group(1)
    raw = bytes(int(h, 16) for h in re.findall(r"0x([0-9a-f]{2})", body))
    fd = fields(gzip.decompress(raw))
    assert get(fd, 2) == b"csi.v1", get(fd, 2)
    out = ["// The Container Storage Interface, spec v1.2.0: generated by",
           "// scripts/csi-proto-from-tree.py from the descriptor in the v1.20.2 tree's vendored Go",
           "// bindings (messages, enums and services; the spec's field options and comments are not",
           "// in it). Do not edit.",
           'syntax = "proto3";', "", "package csi.v1;", ""]
    for dep in all_of(fd, 3):
        d = dep.decode()
        if d != "google/protobuf/descriptor.proto":
            out.append('import "%s";' % d)
    out.append("")
    for s in all_of(fd, 6):
        out += service(s) + [""]
    for e in all_of(fd, 5):
        out += enum(e, "") + [""]
    for m in all_of(fd, 4):
        out += message(m, "", {}) + [""]
    print("\n".join(out).rstrip() + "\n", end="")


main()
