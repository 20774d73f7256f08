/*
 * Point-to-point and collectives over MPI, checked: a token around the ring
 * (MPI_Send/MPI_Recv), a nonblocking exchange with both neighbours
 * (MPI_Isend/MPI_Irecv/MPI_Waitall) of a large message (rendezvous path), MPI_Bcast,
 * MPI_Reduce, MPI_Allreduce, MPI_Allgather, MPI_Alltoall and MPI_Barrier. Prints one
 * line from rank 0 and exits non-zero on any wrong value. Used by scripts/mpi-capi.sh.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (1 << 20)

static void fail(int rank, const char *what, long got, long want)
{
	fprintf(stderr, "rank %d: %s: got %ld, want %ld\n", rank, what, got, want);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
	int rank, size, i, token, left, right, round;
	long sum, *all, *a2a_in, *a2a_out;
	char *sbuf, *rbuf_l, *rbuf_r;
	MPI_Request req[4];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;

	for (round = 0; round < 3; round++) {
		/* The ring: rank 0 starts, each adds its rank. */
		if (rank == 0) {
			token = 1000 * round;
			MPI_Send(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (token != 1000 * round + size * (size - 1) / 2)
				fail(rank, "ring token", token, 1000 * round + size * (size - 1) / 2);
		} else {
			MPI_Recv(&token, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token += rank;
			MPI_Send(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
		}
	}

	/* A large nonblocking exchange with both neighbours. */
	sbuf = malloc(BIG);
	rbuf_l = malloc(BIG);
	rbuf_r = malloc(BIG);
	for (i = 0; i < BIG; i++)
		sbuf[i] = (char)(rank * 31 + i);
	MPI_Irecv(rbuf_l, BIG, MPI_CHAR, left, 9, MPI_COMM_WORLD, &req[0]);
	MPI_Irecv(rbuf_r, BIG, MPI_CHAR, right, 9, MPI_COMM_WORLD, &req[1]);
	MPI_Isend(sbuf, BIG, MPI_CHAR, left, 9, MPI_COMM_WORLD, &req[2]);
	MPI_Isend(sbuf, BIG, MPI_CHAR, right, 9, MPI_COMM_WORLD, &req[3]);
	MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
	for (i = 0; i < BIG; i += 4099) {
		if (rbuf_l[i] != (char)(left * 31 + i))
			fail(rank, "exchange from left", rbuf_l[i], (char)(left * 31 + i));
		if (rbuf_r[i] != (char)(right * 31 + i))
			fail(rank, "exchange from right", rbuf_r[i], (char)(right * 31 + i));
	}

	/* Collectives. */
	token = rank == 0 ? 4242 : -1;
	MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (token != 4242)
		fail(rank, "bcast", token, 4242);
	long mine = rank + 1;
	sum = 0;
	MPI_Reduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0 && sum != (long)size * (size + 1) / 2)
		fail(rank, "reduce", sum, (long)size * (size + 1) / 2);
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (sum != (long)size * (size + 1) / 2)
		fail(rank, "allreduce", sum, (long)size * (size + 1) / 2);
	all = malloc(sizeof(long) * size);
	MPI_Allgather(&mine, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD);
	for (i = 0; i < size; i++)
		if (all[i] != i + 1)
			fail(rank, "allgather", all[i], i + 1);
	a2a_in = malloc(sizeof(long) * size);
	a2a_out = malloc(sizeof(long) * size);
	for (i = 0; i < size; i++)
		a2a_in[i] = rank * 100 + i;
	MPI_Alltoall(a2a_in, 1, MPI_LONG, a2a_out, 1, MPI_LONG, MPI_COMM_WORLD);
	for (i = 0; i < size; i++)
		if (a2a_out[i] != i * 100 + rank)
			fail(rank, "alltoall", a2a_out[i], i * 100 + rank);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("ring, exchange of %d bytes, bcast, reduce, allreduce, allgather, alltoall: ok on %d ranks\n",
		       BIG, size);
	free(sbuf);
	free(rbuf_l);
	free(rbuf_r);
	free(all);
	free(a2a_in);
	free(a2a_out);
	MPI_Finalize();
	return 0;
}
