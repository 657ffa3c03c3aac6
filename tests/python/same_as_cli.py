"""Run by tests/cli/python.sh under mpirun after `hpml kmeans`, `hpml pca` and
`hpml linreg` ran on the same files at the same rank count: the estimators must give the
commands' numbers bit for bit (same library calls on the same blocks of rows).
argv: the folder holding X.npy, y.npy and the commands' outputs."""

import sys

import numpy as np
from mpi4py import MPI

import hpml

d = sys.argv[1]
world = MPI.COMM_WORLD
X = np.load(d + "/X.npy")
y = np.load(d + "/y.npy")
mine = np.array_split(np.arange(len(X)), world.Get_size())[world.Get_rank()]
comm = hpml.Comm()
failures = []


def same(name, got, want):
    if got.shape != want.shape or got.tobytes() != want.tobytes():
        failures.append("%s differs: max |diff| %g" % (name, np.abs(got - want).max()))


km = hpml.KMeans(4, random_state=3, comm=comm).fit(X[mine])
same("kmeans centroids", km.cluster_centers_, np.load(d + "/km.centroids.npy"))
labels = np.concatenate(world.allgather(km.labels_))
same("kmeans labels", labels, np.load(d + "/km.labels.npy").reshape(labels.shape))
pca = hpml.PCA(3, comm=comm).fit(X[mine])
same("pca components", pca.components_, np.load(d + "/pca.npy"))
lr = hpml.Ridge(alpha=0.5, comm=comm).fit(X[mine], y[mine])
pred = np.concatenate(world.allgather(lr.predict(X[mine])))
same("ridge predictions", pred, np.load(d + "/pred.npy").reshape(pred.shape))
comm.free()
if world.Get_rank() == 0:
    print("\n".join(failures) if failures else "estimators = commands: kmeans, pca, ridge")
sys.exit(1 if failures else 0)
