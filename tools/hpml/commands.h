/*
 * The hpml subcommands: one line each, HPML_COMMAND(name, one-line summary).
 * Each is implemented as `int cmd_<name>(int argc, char **argv)` in cmd_<name>.c.
 */
HPML_COMMAND(info, "show hpml's build, the MPI library, nodes, shared memory, BLAS and CPU")
HPML_COMMAND(kmeans, "cluster rows with distributed K-Means (k-means++/k-means||, Lloyd)")
HPML_COMMAND(bench, "OSU-compatible micro-benchmarks: native MPI vs hpml algorithms side by side")
HPML_COMMAND(linreg, "linear / ridge regression by the normal equations (allreduced X'X, Cholesky)")
HPML_COMMAND(pca, "PCA / truncated SVD: allreduced covariance + LAPACK, or randomized SVD")
HPML_COMMAND(knn, "exact k-nearest neighbours search and classification (BLAS brute force)")
HPML_COMMAND(train, "data-parallel training of a neural network (Fashion-MNIST by default)")
HPML_COMMAND(logreg,
             "logistic regression, binary or multinomial, L2, by L-BFGS on allreduced gradients")
HPML_COMMAND(eval, "accuracy and loss of a trained model (hpml train --save) on a data set")
HPML_COMMAND(predict, "class predictions of a trained model for the rows of an image file")
HPML_COMMAND(export, "write a model as a NumPy .npz named as a torch.nn.Sequential's state_dict")
HPML_COMMAND(import, "make a model file from an .npz (hpml export's, or a PyTorch state_dict's)")
HPML_COMMAND(tune,
             "time every collective algorithm here and write a tuning file for HPML_TUNING_FILE")
HPML_COMMAND(prof, "profile any MPI program (LD_PRELOAD): MPI calls, matrix, sizes, I/O, report")
