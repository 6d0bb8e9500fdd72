/*
 * A stand-in for k8s.gcr.io/stress:v1 (github.com/vishh/stress), the memory hog of the node e2e
 * suite's memory eviction specs: the same memory flags, the same behaviour. Every
 * -mem-alloc-sleep it allocates -mem-alloc-size more and writes every page of it, until
 * -mem-total is reached (0: no limit); then it holds what it has and sleeps. -cpus is accepted
 * (0 only: the suite never asks for CPU load). Sizes take the suite's suffixes (Ki, Mi, Gi, k,
 * M, G) or plain bytes; durations s, m, h or ms. An unknown flag or a malformed value is
 * refused with the flag's name, exit code 2.
 *
 * Built static (gcc -static) into the image by scripts/conformance.sh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage_error(const char *flag, const char *value) {
	fprintf(stderr, "stress: invalid value %s for flag %s\n", value ? value : "(none)", flag);
	exit(2);
}

/* Bytes from "12Mi", "4Gi", "100M", "1048576". */
static unsigned long long parse_size(const char *flag, const char *s) {
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s) usage_error(flag, s);
	static const struct { const char *suffix; unsigned long long mult; } units[] = {
		{"", 1ULL}, {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30},
		{"k", 1000ULL}, {"K", 1000ULL}, {"M", 1000000ULL}, {"G", 1000000000ULL},
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			if (v > ~0ULL / units[i].mult) usage_error(flag, s);
			return v * units[i].mult;
		}
	}
	usage_error(flag, s);
	return 0;
}

/* Nanoseconds from "10s", "500ms", "1m", "1h". */
static unsigned long long parse_duration(const char *flag, const char *s) {
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s) usage_error(flag, s);
	if (strcmp(end, "ms") == 0) return v * 1000000ULL;
	if (strcmp(end, "s") == 0) return v * 1000000000ULL;
	if (strcmp(end, "m") == 0) return v * 60000000000ULL;
	if (strcmp(end, "h") == 0) return v * 3600000000000ULL;
	usage_error(flag, s);
	return 0;
}

static void sleep_ns(unsigned long long ns) {
	struct timespec t = {.tv_sec = (time_t)(ns / 1000000000ULL), .tv_nsec = (long)(ns % 1000000000ULL)};
	while (nanosleep(&t, &t) == -1 && errno == EINTR) {
	}
}

int main(int argc, char **argv) {
	unsigned long long alloc_size = 0, total = 0, pause_ns = 1000000000ULL;
	for (int i = 1; i < argc; i++) {
		/* Go's flag package: -flag value, --flag value, -flag=value. */
		const char *arg = argv[i];
		if (arg[0] == '-' && arg[1] == '-') arg++;
		char name[64];
		const char *value = NULL;
		const char *eq = strchr(arg, '=');
		size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
		if (len >= sizeof name) usage_error(arg, NULL);
		memcpy(name, arg, len);
		name[len] = '\0';
		if (eq) value = eq + 1;
		else if (i + 1 < argc) value = argv[++i];
		if (value == NULL) usage_error(name, NULL);
		if (strcmp(name, "-mem-alloc-size") == 0) alloc_size = parse_size(name, value);
		else if (strcmp(name, "-mem-total") == 0) total = parse_size(name, value);
		else if (strcmp(name, "-mem-alloc-sleep") == 0) pause_ns = parse_duration(name, value);
		else if (strcmp(name, "-cpus") == 0) {
			if (strcmp(value, "0") != 0) usage_error(name, value);
		} else if (strcmp(name, "-logtostderr") == 0 || strcmp(name, "-v") == 0) {
			/* glog's flags of the original: accepted, nothing to log. */
		} else {
			fprintf(stderr, "stress: flag provided but not defined: %s\n", name);
			return 2;
		}
	}
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0) page = 4096;
	unsigned long long held = 0;
	printf("stress: allocating %llu bytes every %llu ms up to %llu bytes\n", alloc_size,
	       pause_ns / 1000000ULL, total);
	fflush(stdout);
	for (;;) {
		if (alloc_size > 0 && (total == 0 || held < total)) {
			unsigned long long n = alloc_size;
			if (total != 0 && held + n > total) n = total - held;
			char *p = malloc(n);
			if (p == NULL) {
				fprintf(stderr, "stress: cannot allocate %llu more bytes (holding %llu)\n", n, held);
			} else {
				/* Touch every page: the memory is charged, not only reserved. */
				for (unsigned long long off = 0; off < n; off += (unsigned long long)page) p[off] = 1;
				held += n;
				printf("stress: holding %llu bytes\n", held);
				fflush(stdout);
			}
		}
		sleep_ns(pause_ns);
	}
}
