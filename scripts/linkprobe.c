/* linkprobe: the limit of a link measured with plain sockets, for scripts/compare.py.
 *
 * What the libraries are compared with: the same host pair, no library in the way.
 *   linkprobe server tcp|udp|stream PORT
 *   linkprobe client tcp|udp HOST PORT SIZE ITERS   -> "usec_per_xfer <x>" (half a round trip)
 *   linkprobe client stream HOST PORT SECONDS       -> "mb_per_sec <x>" (10^6 B/s)
 *
 * The ping-pongs busy-poll non-blocking sockets (as both fi_pingpong tools busy-poll their
 * completion queues), TCP with TCP_NODELAY. The stream writes 1 MiB blocks for SECONDS.
 * The server serves one session and exits; each process ends itself after LIMIT_SECONDS
 * (alarm), whatever happens, and the caller also kills it by PID.
 *
 * Build: cc -O2 -o linkprobe scripts/linkprobe.c (compare.py does this in a temp dir).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LIMIT_SECONDS 120
#define STREAM_BLOCK (1 << 20)

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Receive exactly len bytes (TCP) spinning on a non-blocking socket; 0 at end of stream. */
static int recv_all(int fd, char *buf, size_t len, int spin)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = recv(fd, buf + got, len - got, spin ? MSG_DONTWAIT : 0);
		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			return 0;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			die("recv");
		}
	}
	return 1;
}

static void send_all(int fd, const char *buf, size_t len)
{
	size_t sent = 0;
	while (sent < len) {
		ssize_t n = send(fd, buf + sent, len - sent, MSG_NOSIGNAL);
		if (n > 0)
			sent += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			die("send");
	}
}

static int bound_socket(int type, int port)
{
	int fd = socket(AF_INET, type, 0);
	int one = 1;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
		die("bind");
	return fd;
}

static void peer_addr(struct sockaddr_in *addr, const char *host, int port)
{
	memset(addr, 0, sizeof *addr);
	addr->sin_family = AF_INET;
	addr->sin_port = htons(port);
	if (inet_pton(AF_INET, host, &addr->sin_addr) != 1) {
		fprintf(stderr, "bad IPv4 address %s\n", host);
		exit(2);
	}
}

static int tcp_connect(const char *host, int port)
{
	struct sockaddr_in addr;
	int one = 1;
	double deadline = now() + 10;
	peer_addr(&addr, host, port);
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			return fd;
		}
		close(fd);
		if (now() > deadline)
			die("connect");
		usleep(20000);
	}
}

static int tcp_accept(int port)
{
	int lfd = bound_socket(SOCK_STREAM, port), fd, one = 1;
	if (listen(lfd, 1) < 0)
		die("listen");
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(lfd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* Session header from client to server: the message size (TCP ping-pong, 8 bytes). */
static void serve_tcp(int port)
{
	int fd = tcp_accept(port);
	unsigned long long size;
	char *buf;
	if (!recv_all(fd, (char *)&size, sizeof size, 0) || size == 0 || size > (1ull << 30))
		exit(1);
	buf = malloc(size);
	if (!buf)
		die("malloc");
	while (recv_all(fd, buf, size, 1))
		send_all(fd, buf, size);
	exit(0);
}

static void client_tcp(const char *host, int port, size_t size, long iters)
{
	int fd = tcp_connect(host, port);
	unsigned long long header = size;
	char *buf = calloc(1, size);
	double start;
	if (!buf)
		die("malloc");
	send_all(fd, (char *)&header, sizeof header);
	for (long warm = 0; warm < iters / 10 + 1; warm++) {
		send_all(fd, buf, size);
		recv_all(fd, buf, size, 1);
	}
	start = now();
	for (long iter = 0; iter < iters; iter++) {
		send_all(fd, buf, size);
		if (!recv_all(fd, buf, size, 1))
			die("peer closed");
	}
	printf("usec_per_xfer %.3f\n", (now() - start) * 1e6 / (2.0 * iters));
	close(fd);
}

/* UDP: the client's first datagram names the session; a zero-length datagram ends it. */
static void serve_udp(int port)
{
	int fd = bound_socket(SOCK_DGRAM, port);
	static char buf[65536];
	struct sockaddr_in from;
	socklen_t fromlen;
	for (;;) {
		ssize_t n;
		fromlen = sizeof from;
		n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fromlen);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			die("recvfrom");
		}
		if (n == 0)
			exit(0);
		if (sendto(fd, buf, n, 0, (struct sockaddr *)&from, fromlen) < 0)
			die("sendto");
	}
}

static void client_udp(const char *host, int port, size_t size, long iters)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in addr;
	static char buf[65536];
	double start;
	if (fd < 0)
		die("socket");
	if (size == 0 || size > 65507) {
		fprintf(stderr, "udp size must be 1..65507\n");
		exit(2);
	}
	peer_addr(&addr, host, port);
	if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
		die("connect");
	/* The first exchange also waits for the server to be up: resend until answered. */
	for (double deadline = now() + 10;;) {
		double sent_at = now();
		ssize_t n = -1;
		send(fd, buf, size, 0);
		while (now() - sent_at < 0.05 && n < 0)
			n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n >= 0)
			break;
		if (now() > deadline)
			die("no answer");
	}
	for (long warm = 0; warm < iters / 10; warm++) {
		send(fd, buf, size, 0);
		while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) < 0)
			;
	}
	start = now();
	for (long iter = 0; iter < iters; iter++) {
		if (send(fd, buf, size, 0) < 0)
			die("send");
		/* A datagram lost on the pair ends the run: no answer 2 s after the 4096th empty
		 * poll (the clock is read only every 4096 polls). */
		double waiting_since = 0;
		for (unsigned long polls = 1; recv(fd, buf, sizeof buf, MSG_DONTWAIT) < 0; polls++) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				die("recv");
			if (polls % 4096 == 0) {
				if (waiting_since == 0) {
					waiting_since = now();
				} else if (now() - waiting_since > 2.0) {
					fprintf(stderr, "udp: a datagram was lost\n");
					exit(1);
				}
			}
		}
	}
	printf("usec_per_xfer %.3f\n", (now() - start) * 1e6 / (2.0 * iters));
	send(fd, buf, 0, 0);
	close(fd);
}

static void serve_stream(int port)
{
	int fd = tcp_accept(port);
	char *buf = malloc(STREAM_BLOCK);
	unsigned long long total = 0;
	if (!buf)
		die("malloc");
	for (;;) {
		ssize_t n = recv(fd, buf, STREAM_BLOCK, 0);
		if (n <= 0)
			break;
		total += (unsigned long long)n;
	}
	/* Tell the client how much arrived, so its figure counts delivered bytes only. */
	send_all(fd, (char *)&total, sizeof total);
	exit(0);
}

static void client_stream(const char *host, int port, double seconds)
{
	int fd = tcp_connect(host, port);
	char *buf = calloc(1, STREAM_BLOCK);
	unsigned long long total = 0;
	double start, end;
	if (!buf)
		die("malloc");
	start = now();
	while (now() - start < seconds)
		send_all(fd, buf, STREAM_BLOCK);
	shutdown(fd, SHUT_WR);
	if (!recv_all(fd, (char *)&total, sizeof total, 0))
		die("no total");
	end = now();
	printf("mb_per_sec %.1f\n", total / (end - start) / 1e6);
	close(fd);
}

int main(int argc, char **argv)
{
	alarm(LIMIT_SECONDS);
	if (argc == 4 && !strcmp(argv[1], "server")) {
		int port = atoi(argv[3]);
		if (!strcmp(argv[2], "tcp"))
			serve_tcp(port);
		if (!strcmp(argv[2], "udp"))
			serve_udp(port);
		if (!strcmp(argv[2], "stream"))
			serve_stream(port);
	} else if (argc == 7 && !strcmp(argv[1], "client") &&
		   (!strcmp(argv[2], "tcp") || !strcmp(argv[2], "udp"))) {
		size_t size = strtoul(argv[5], NULL, 10);
		long iters = atol(argv[6]);
		if (size == 0 || iters <= 0) {
			fprintf(stderr, "size and iterations must be positive\n");
			return 2;
		}
		if (!strcmp(argv[2], "tcp"))
			client_tcp(argv[3], atoi(argv[4]), size, iters);
		else
			client_udp(argv[3], atoi(argv[4]), size, iters);
		return 0;
	} else if (argc == 6 && !strcmp(argv[1], "client") && !strcmp(argv[2], "stream")) {
		client_stream(argv[3], atoi(argv[4]), atof(argv[5]));
		return 0;
	}
	fprintf(stderr, "usage: linkprobe server tcp|udp|stream PORT\n"
			"       linkprobe client tcp|udp HOST PORT SIZE ITERS\n"
			"       linkprobe client stream HOST PORT SECONDS\n");
	return 2;
}
