#!/usr/bin/env python3
"""SLEPc's LOBPCG at its defaults on several MPI ranks, for the 2-core comparison.

Usage: mpirun --oversubscribe -np 2 python slepc_mpi.py FILE.mtx [--nev 4] [--tol 1e-8]
       [--solver lobpcg|lobpcg-nopc|ks]

Every rank reads the MatrixMarket file (fast_matrix_market, else scipy.io.mmread) and
inserts its own block of rows of a PETSc MPIAIJ matrix (PETSc's default row split);
EPS then runs as eig_compare.py runs it on one process: HEP, SMALLEST_REAL, NORM
convergence test, nev = --nev, everything else SLEPc's default (for LOBPCG: STPRECOND
with PCBJACOBI, ILU(0) on each rank's diagonal block). Rank 0 prints one JSON line:
solver, nprocs, eigenvalues, converged count, matvecs (MatMult calls plus the columns
of the MatMatMult block products, from their logged flops: 2 nnz per column, summed
over the ranks), and wall_seconds (the solve only, MPI-synchronized before and after).
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("matrix")
    ap.add_argument("--nev", type=int, default=4)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--solver", default="lobpcg", choices=["lobpcg", "lobpcg-nopc", "ks"])
    args = ap.parse_args()

    import petsc4py

    petsc4py.init(sys.argv[:1])
    from petsc4py import PETSc
    import slepc4py

    slepc4py.init(sys.argv[:1])
    from slepc4py import SLEPc

    try:
        import fast_matrix_market as fmm

        a = fmm.read_scipy(args.matrix).tocsr()
    except ImportError:
        import scipy.io

        a = scipy.io.mmread(args.matrix).tocsr()
    n = a.shape[0]
    comm = PETSc.COMM_WORLD
    m = PETSc.Mat().create(comm=comm)
    m.setSizes(((PETSc.DECIDE, n), (PETSc.DECIDE, n)))
    m.setType(PETSc.Mat.Type.AIJ)
    m.setUp()
    r0, r1 = m.getOwnershipRange()
    local = a[r0:r1]
    m.setPreallocationCSR((local.indptr, local.indices))
    m.setValuesCSR(local.indptr, local.indices, local.data)
    m.assemble()

    eps = SLEPc.EPS().create(comm=comm)
    eps.setOperators(m)
    eps.setProblemType(SLEPc.EPS.ProblemType.HEP)
    eps.setType({"lobpcg": SLEPc.EPS.Type.LOBPCG, "lobpcg-nopc": SLEPc.EPS.Type.LOBPCG,
                 "ks": SLEPc.EPS.Type.KRYLOVSCHUR}[args.solver])
    eps.setWhichEigenpairs(SLEPc.EPS.Which.SMALLEST_REAL)
    eps.setConvergenceTest(SLEPc.EPS.Conv.NORM)
    eps.setDimensions(nev=args.nev)
    eps.setTolerances(tol=args.tol)
    if args.solver == "lobpcg-nopc":
        eps.getST().getKSP().getPC().setType(PETSc.PC.Type.NONE)
    PETSc.Log.begin()
    comm.barrier()
    t0 = time.perf_counter()
    eps.solve()
    comm.barrier()
    wall = time.perf_counter() - t0
    nconv = eps.getConverged()
    vals = sorted(eps.getEigenvalue(i).real for i in range(min(nconv, args.nev)))
    mults = PETSc.Log.Event("MatMult").getPerfInfo()["count"]
    # Each rank's sparse-times-dense flops, summed through a PETSc vector.
    flops = PETSc.Vec().createMPI((1, PETSc.DECIDE), comm=comm)
    flops.getArray()[0] = PETSc.Log.Event("MatMatMultNum").getPerfInfo()["flops"]
    mults += round(flops.sum() / (2.0 * max(a.nnz, 1)))
    if comm.getRank() == 0:
        print(json.dumps({"solver": "slepc-" + args.solver, "nprocs": comm.getSize(),
                          "n": n, "eigenvalues": vals, "converged": nconv,
                          "matvecs": mults, "wall_seconds": wall}), flush=True)


if __name__ == "__main__":
    main()
