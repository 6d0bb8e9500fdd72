#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const PATH: &[u8] = b"/var/lib/kubelet/device-plugins/kubelet.sock";

fn request(authority: &[u8], path: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b":method".to_vec(), b"POST".to_vec()),
        (b":scheme".to_vec(), b"http".to_vec()),
        (b":path".to_vec(), path.to_vec()),
        (b":authority".to_vec(), authority.to_vec()),
        (b"content-type".to_vec(), b"application/grpc".to_vec()),
        (b"te".to_vec(), b"trailers".to_vec()),
    ]
}

fn encode(enc: &mut Encoder<'static>, headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    enc.encode_into(
        headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
        &mut out,
    )
    .unwrap();
    out
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = frame_header(payload.len(), kind, flags, stream).to_vec();
    f.extend_from_slice(payload);
    f
}

/// The frames of a byte stream after the preface: (type, flags, stream, payload).
fn frames(mut b: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    assert_eq!(&b[..24], PREFACE);
    b = &b[24..];
    let mut out = Vec::new();
    while !b.is_empty() {
        let len = (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
        let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        out.push((b[3], b[4], stream, b[9..9 + len].to_vec()));
        b = &b[9 + len..];
    }
    out
}

async fn relay_bytes(input: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    AuthorityRewriter::new().relay(input, &mut out).await?;
    Ok(out)
}

#[tokio::test]
async fn a_socket_path_authority_becomes_localhost_and_everything_else_passes() {
    let mut client = Encoder::new();
    let first = request(PATH, b"/v1beta1.Registration/Register");
    let second = request(PATH, b"/v1beta1.Registration/Register");
    let block1 = encode(&mut client, &first);
    // The second block refers to the client's dynamic table.
    let block2 = encode(&mut client, &second);
    assert!(
        block2.len() < block1.len(),
        "the client indexed its headers"
    );
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
                                         // Stream 1: HEADERS padded, with priority, split into a CONTINUATION.
    let (a, b) = block1.split_at(10);
    let mut payload = vec![3u8]; // pad length
    payload.extend_from_slice(&[0, 0, 0, 0, 16]); // priority
    payload.extend_from_slice(a);
    payload.extend_from_slice(&[0, 0, 0]);
    input.extend(frame(HEADERS, PADDED | PRIORITY, 1, &payload));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, b));
    input.extend(frame(0x0, END_STREAM, 1, b"\0\0\0\0\x02hi")); // DATA
                                                                // Stream 3: one HEADERS frame with END_STREAM.
    input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 3, &block2));
    let out = relay_bytes(&input).await.unwrap();
    let f = frames(&out);
    assert_eq!(f.len(), 4, "{f:?}");
    assert_eq!((f[0].0, f[0].3.len()), (0x4, 0));
    let mut server = Decoder::new();
    let (kind, flags, stream, payload) = &f[1];
    assert_eq!((*kind, *stream), (HEADERS, 1));
    assert_eq!(*flags, END_HEADERS | PRIORITY);
    assert_eq!(&payload[..5], &[0, 0, 0, 0, 16]);
    let got = server.decode(&payload[5..]).unwrap();
    assert_eq!(
        got,
        request(b"localhost", b"/v1beta1.Registration/Register")
    );
    assert_eq!(f[2], (0x0, END_STREAM, 1, b"\0\0\0\0\x02hi".to_vec()));
    let (kind, flags, stream, payload) = &f[3];
    assert_eq!(
        (*kind, *flags, *stream),
        (HEADERS, END_HEADERS | END_STREAM, 3)
    );
    assert_eq!(
        server.decode(payload).unwrap(),
        request(b"localhost", b"/v1beta1.Registration/Register")
    );
}

#[tokio::test]
async fn a_valid_authority_is_kept() {
    let mut client = Encoder::new();
    let headers = request(b"localhost:10250", b"/x");
    let mut input = PREFACE.to_vec();
    input.extend(frame(
        HEADERS,
        END_HEADERS,
        1,
        &encode(&mut client, &headers),
    ));
    let out = relay_bytes(&input).await.unwrap();
    let f = frames(&out);
    assert_eq!(Decoder::new().decode(&f[0].3).unwrap(), headers);
}

#[tokio::test]
async fn a_large_header_block_is_split_into_continuations() {
    let mut client = Encoder::new();
    let mut headers = request(PATH, b"/x");
    headers.push((b"big".to_vec(), vec![b'a'; 40_000]));
    let mut input = PREFACE.to_vec();
    input.extend(frame(
        HEADERS,
        END_HEADERS,
        1,
        &encode(&mut client, &headers),
    ));
    let out = relay_bytes(&input).await.unwrap();
    let f = frames(&out);
    assert_eq!(f.len(), 3);
    assert_eq!((f[0].0, f[0].1), (HEADERS, 0));
    assert_eq!((f[1].0, f[1].1), (CONTINUATION, 0));
    assert_eq!((f[2].0, f[2].1), (CONTINUATION, END_HEADERS));
    let block: Vec<u8> = f.iter().flat_map(|x| x.3.clone()).collect();
    let got = Decoder::new().decode(&block).unwrap();
    assert_eq!(got[3].1, b"localhost");
    assert_eq!(got[6].1.len(), 40_000);
}

#[tokio::test]
async fn broken_input_ends_the_relay_with_a_reason() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            [PREFACE.as_slice(), &[0x10, 0, 1, 0, 0, 0, 0, 0, 1]].concat(),
            "over the relay's bound",
        ),
        (
            [
                PREFACE.as_slice(),
                &frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0xff]),
            ]
            .concat(),
            "does not decode",
        ),
        (
            [
                PREFACE.as_slice(),
                &frame(HEADERS, 0, 1, &[0x82]),
                &frame(0x0, 0, 1, b"x"),
            ]
            .concat(),
            "not followed by its CONTINUATION",
        ),
        (
            [
                PREFACE.as_slice(),
                &frame(HEADERS, PADDED | END_HEADERS, 1, &[9, 0x82]),
            ]
            .concat(),
            "padding longer",
        ),
        (
            [PREFACE.as_slice(), &[0, 0]].concat(),
            "inside a frame header",
        ),
    ];
    for (input, want) in cases {
        let err = relay_bytes(&input).await.unwrap_err().to_string();
        assert!(err.contains(want), "{want}: {err}");
    }
    // Not HTTP/2: passed through for the server to refuse.
    let http1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nmore".to_vec();
    assert_eq!(relay_bytes(&http1).await.unwrap(), http1);
}
