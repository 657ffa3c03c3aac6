/* hpml._fast: the compiled hot path of hpml.Comm (CPython extension).
 *
 * Comm.allreduce and Comm.bcast on C-contiguous buffers of a native hpml element type, or
 * of the type dtype= names when the buffer can hold it (NumPy arrays, bytearray,
 * memoryview), cost one C call here, against one to two microseconds of argument handling
 * and cffi's foreign call in Python (docs/performance.md, "python"). Plain NumPy arrays
 * are read through NumPy's C API (an export of one costs more than the rest of the call);
 * other buffers are exported through the buffer protocol. Every other case (op given as
 * an mpi4py Op, dtype= as a NumPy dtype, recvbuf=None, a buffer the fast path cannot
 * take, a freed Comm) is handed, arguments unchanged, to the checked Python
 * implementation, which raises hpml's errors.
 *
 * The module does not link libhpml: hpml._lib loads libhpml through cffi for the MPI that
 * mpi4py uses and gives setup() the addresses of hpml_allreduce_algo and hpml_bcast_algo,
 * so one build of this module serves both MPIs. The GIL is released around each call, as
 * cffi and mpi4py do. Bound is what Comm.allreduce_init and bcast_init return: arguments
 * checked once in Python, then one C call per use.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <structmember.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

typedef int (*allreduce_fn)(int algo, const void *sendbuf, void *recvbuf, size_t count, int dtype,
                            int op, void *comm);
typedef int (*bcast_fn)(int algo, void *buf, size_t count, int dtype, int root, void *comm);

/* What setup() gives: the C functions, hpml.IN_PLACE, the name -> code tables and the
 * Python fallbacks (unbound functions taking self first) and error raiser. */
static allreduce_fn g_allreduce;
static bcast_fn g_bcast;
static PyObject *g_in_place, *g_ops, *g_dtypes, *g_allreduce_algos, *g_bcast_algos;
static PyObject *g_slow_allreduce, *g_slow_bcast, *g_raise_error;
static PyObject *g_str_allreduce, *g_str_bcast;

/* hpml_dtype_t codes (include/hpml/core.h). */
enum { F32, F64, F16, BF16, I8, U8, I32, I64 };

typedef struct {
    PyObject_HEAD void *c; /* hpml_comm_t *, NULL once freed */
    int size;              /* ranks of the communicator */
} CommBase;

/* Element sizes of the hpml dtypes, and the formats that may hold each when dtype= names
 * it (bytes, 'B' and 'c', hold anything): hpml.comm's DTYPE_SIZE and _HOLDS. */
static const Py_ssize_t dt_size[] = {4, 8, 2, 2, 1, 1, 4, 8};
static const char *const dt_holds[] = {"f", "d", "eH", "H", "b", "B", "i", "lq"};

/* The hpml dtype of `len` bytes of elements of struct format f ('@' prefix allowed) and
 * `itemsize` bytes: the format's own (want < 0; 16-bit integers need dtype= to say f16
 * or bf16 and go to the checked path), or `want` if the elements can hold it, whole
 * elements only; -1 otherwise (the checked path then says what is wrong). */
static int elem_dtype(const char *f, Py_ssize_t itemsize, Py_ssize_t len, int want)
{
    if (f[0] == '@')
        f++;
    if (f[0] == '\0' || f[1] != '\0')
        return -1;
    if (want >= 0) {
        if (len % dt_size[want])
            return -1;
        if (f[0] == 'B' || f[0] == 'c')
            return want;
        return strchr(dt_holds[want], f[0]) != NULL && itemsize == dt_size[want] ? want : -1;
    }
    int dt;
    switch (f[0]) {
    case 'f': dt = F32; break;
    case 'd': dt = F64; break;
    case 'e': dt = F16; break;
    case 'b': dt = I8; break;
    case 'B': dt = U8; break;
    case 'i': dt = I32; break;
    case 'l':
    case 'q': dt = I64; break;
    default: return -1;
    }
    return itemsize == dt_size[dt] ? dt : -1;
}

/* The hpml dtype of an exported buffer (elem_dtype of its format). */
static int buffer_dtype(const Py_buffer *b, int want)
{
    return elem_dtype(b->format ? b->format : "B", b->itemsize, b->len, want);
}

/* A view of a buffer argument: its data, bytes and hpml dtype, and the export to release
 * (none for a NumPy array read directly). */
typedef struct {
    void *p;
    Py_ssize_t len;
    int dt;
    int exported;
    Py_buffer b;
} view_t;

/* Array flags a NumPy array may carry to be read directly; any other (a writeback copy,
 * NumPy's private warn-on-write mark) sends it through the buffer protocol. */
#define NPY_PLAIN_FLAGS                                                                            \
    (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_F_CONTIGUOUS | NPY_ARRAY_OWNDATA | NPY_ARRAY_ALIGNED |     \
     NPY_ARRAY_WRITEABLE)

/* NumPy's type characters (the struct formats of their exports) the fast path may take:
 * the hpml element types and uint16 (f16 or bf16 bits with dtype=). */
static int plain_type(char t)
{
    switch (t) {
    case 'f':
    case 'd':
    case 'e':
    case 'b':
    case 'B':
    case 'i':
    case 'l':
    case 'q':
    case 'H': return 1;
    default: return 0;
    }
}

/* Take a buffer argument: an exact NumPy array, C-contiguous, in native byte order, of a
 * plain element type and, when `writable`, writeable, is read from the array itself
 * (NumPy builds an export's format string and shape anew on every request: most of the
 * plain call's cost over the bound one); anything else through the buffer protocol,
 * C-contiguous (and writable). 0, or -1 with no error set when the fast path cannot take
 * it (the checked path then does, or says what is wrong). */
static int view_get(PyObject *o, int writable, int want, view_t *v)
{
    if (PyArray_CheckExact(o)) {
        PyArrayObject *a = (PyArrayObject *)o;
        int flags = PyArray_FLAGS(a);
        char f[2] = {PyArray_DESCR(a)->type, '\0'};

        if ((flags & ~NPY_PLAIN_FLAGS) == 0 && (flags & NPY_ARRAY_C_CONTIGUOUS) &&
            (!writable || (flags & NPY_ARRAY_WRITEABLE)) && PyArray_ISNOTSWAPPED(a) &&
            plain_type(f[0])) {
            v->p = PyArray_DATA(a);
            v->len = PyArray_NBYTES(a);
            v->dt = elem_dtype(f, PyArray_ITEMSIZE(a), v->len, want);
            v->exported = 0;
            return v->dt < 0 ? -1 : 0;
        }
    }
    if (PyObject_GetBuffer(o, &v->b,
                           PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0))) {
        PyErr_Clear();
        return -1;
    }
    v->p = v->b.buf;
    v->len = v->b.len;
    v->dt = buffer_dtype(&v->b, want);
    v->exported = 1;
    if (v->dt < 0) {
        PyBuffer_Release(&v->b);
        return -1;
    }
    return 0;
}

static void view_release(view_t *v)
{
    if (v->exported)
        PyBuffer_Release(&v->b);
}

/* The code of a name in a table (a dict of str -> int), or -1 if absent or not a str. */
static int lookup(PyObject *table, PyObject *name)
{
    if (!PyUnicode_CheckExact(name))
        return -1;
    PyObject *v = PyDict_GetItemWithError(table, name); /* borrowed */
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    long code = PyLong_AsLong(v);
    if (code == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return (int)code;
}

/* The last name looked up in one table and its code, the name held: a call that passes
 * the same str object again (a literal, a variable) skips the dict lookup. setup()
 * clears them with the tables they cache. */
typedef struct {
    PyObject *name;
    int code;
} memo_t;

static memo_t m_ops, m_dtypes, m_allreduce_algos, m_bcast_algos;

static int lookup_memo(PyObject *table, memo_t *m, PyObject *name)
{
    if (name == m->name)
        return m->code;
    int code = lookup(table, name);
    if (code >= 0) {
        Py_INCREF(name);
        Py_XSETREF(m->name, name);
        m->code = code;
    }
    return code;
}

/* Place the positional and keyword arguments of a vectorcall into slots[0..n) by the
 * parameter names; 0 if they fit the signature, -1 if not (the checked path then raises
 * Python's own TypeError for the same call). */
static int place_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      const char *const *names, int n, PyObject **slots)
{
    if (nargs > n)
        return -1;
    for (int i = 0; i < n; i++)
        slots[i] = i < nargs ? args[i] : NULL;
    if (kwnames == NULL)
        return 0;
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(key, names[i]) != 0)
            i++;
        if (i == n || slots[i] != NULL)
            return -1;
        slots[i] = args[nargs + k];
    }
    return 0;
}

/* Call the checked Python implementation fn(self, *args, **kw) with the same arguments. */
static PyObject *fallback(PyObject *fn, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[8];
    PyObject **all = small;
    if (1 + nargs + nk > 8) {
        all = PyMem_Malloc((size_t)(1 + nargs + nk) * sizeof(PyObject *));
        if (all == NULL)
            return PyErr_NoMemory();
    }
    all[0] = self;
    for (Py_ssize_t i = 0; i < nargs + nk; i++)
        all[1 + i] = args[i];
    PyObject *r = PyObject_Vectorcall(fn, all, 1 + nargs, kwnames);
    if (all != small)
        PyMem_Free(all);
    return r;
}

/* Raise hpml's error for a failed call (hpml._lib.raise_error(rc, what)); NULL. */
static PyObject *raise_rc(int rc, PyObject *what)
{
    PyObject *code = PyLong_FromLong(rc);
    if (code == NULL)
        return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(g_raise_error, code, what, NULL);
    Py_DECREF(code);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "hpml: error %d", rc);
    return NULL;
}

static PyObject *comm_allreduce(PyObject *op_self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"sendbuf", "recvbuf", "op", "algo", "dtype"};
    CommBase *self = (CommBase *)op_self;
    PyObject *a[5];
    if (g_allreduce == NULL || self->c == NULL || place_args(args, nargs, kwnames, names, 5, a) ||
        a[0] == NULL || a[1] == NULL || a[1] == Py_None)
        return fallback(g_slow_allreduce, op_self, args, nargs, kwnames);
    int op = a[2] ? lookup_memo(g_ops, &m_ops, a[2]) : 0;
    int algo = a[3] ? lookup_memo(g_allreduce_algos, &m_allreduce_algos, a[3]) : 0;
    int want = a[4] && a[4] != Py_None ? lookup_memo(g_dtypes, &m_dtypes, a[4]) : -1;
    if (op < 0 || algo < 0 || want > I64 || (a[4] && a[4] != Py_None && want < 0))
        return fallback(g_slow_allreduce, op_self, args, nargs, kwnames);

    view_t rv, sv;
    if (view_get(a[1], 1, want, &rv))
        return fallback(g_slow_allreduce, op_self, args, nargs, kwnames);
    int in_place = a[0] == g_in_place;
    const void *sp = (const void *)1; /* HPML_IN_PLACE */
    if (!in_place) {
        int ok = view_get(a[0], 0, want, &sv) == 0;
        if (ok && (sv.dt != rv.dt || sv.len != rv.len)) {
            view_release(&sv);
            ok = 0;
        }
        if (!ok) {
            view_release(&rv);
            return fallback(g_slow_allreduce, op_self, args, nargs, kwnames);
        }
        sp = sv.p;
    }
    PyThreadState *ts = PyEval_SaveThread();
    int rc = g_allreduce(algo, sp, rv.p, (size_t)(rv.len / dt_size[rv.dt]), rv.dt, op, self->c);
    PyEval_RestoreThread(ts);
    if (!in_place)
        view_release(&sv);
    view_release(&rv);
    if (rc)
        return raise_rc(rc, g_str_allreduce);
    Py_INCREF(a[1]);
    return a[1];
}

static PyObject *comm_bcast(PyObject *op_self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"buf", "root", "algo", "dtype"};
    CommBase *self = (CommBase *)op_self;
    PyObject *a[4];
    if (g_bcast == NULL || self->c == NULL || place_args(args, nargs, kwnames, names, 4, a) ||
        a[0] == NULL)
        return fallback(g_slow_bcast, op_self, args, nargs, kwnames);
    int want = a[3] && a[3] != Py_None ? lookup_memo(g_dtypes, &m_dtypes, a[3]) : -1;
    if (want > I64 || (a[3] && a[3] != Py_None && want < 0))
        return fallback(g_slow_bcast, op_self, args, nargs, kwnames);
    long root = 0;
    if (a[1] != NULL) {
        root = PyLong_CheckExact(a[1]) ? PyLong_AsLong(a[1]) : -1;
        if (root == -1 && PyErr_Occurred())
            PyErr_Clear();
    }
    int algo = a[2] ? lookup_memo(g_bcast_algos, &m_bcast_algos, a[2]) : 0;
    if (root < 0 || root >= self->size || algo < 0)
        return fallback(g_slow_bcast, op_self, args, nargs, kwnames);
    view_t v;
    if (view_get(a[0], 1, want, &v))
        return fallback(g_slow_bcast, op_self, args, nargs, kwnames);
    PyThreadState *ts = PyEval_SaveThread();
    int rc = g_bcast(algo, v.p, (size_t)(v.len / dt_size[v.dt]), v.dt, (int)root, self->c);
    PyEval_RestoreThread(ts);
    view_release(&v);
    if (rc)
        return raise_rc(rc, g_str_bcast);
    Py_INCREF(a[0]);
    return a[0];
}

/* _set_c(address, size): the hpml_comm_t * (as an integer; 0 when freed) and its size. */
static PyObject *comm_set_c(PyObject *op_self, PyObject *args)
{
    CommBase *self = (CommBase *)op_self;
    unsigned long long addr;
    int size;
    if (!PyArg_ParseTuple(args, "Ki", &addr, &size))
        return NULL;
    self->c = (void *)(uintptr_t)addr;
    self->size = size;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(allreduce_doc,
             "allreduce($self, sendbuf, recvbuf=None, op='sum', algo='auto', dtype=None)\n--\n\n"
             "Reduce sendbuf over the ranks into recvbuf on every rank and return recvbuf.\n"
             "sendbuf=hpml.IN_PLACE reduces recvbuf in place; recvbuf=None allocates one like\n"
             "sendbuf. op: sum prod min max avg (or MPI.SUM...), algo: auto or an algorithm of\n"
             "hpml.ALGOS['allreduce'], dtype: overrides the buffers' element type (needed for\n"
             "bf16/f16 bits in uint16 arrays).");
PyDoc_STRVAR(bcast_doc, "bcast($self, buf, root=0, algo='auto', dtype=None)\n--\n\n"
                        "Broadcast root's buf into buf on every rank (in place); returns buf.");

static PyMethodDef comm_methods[] = {
    {"allreduce", (PyCFunction)(void (*)(void))comm_allreduce, METH_FASTCALL | METH_KEYWORDS,
     allreduce_doc},
    {"bcast", (PyCFunction)(void (*)(void))comm_bcast, METH_FASTCALL | METH_KEYWORDS, bcast_doc},
    {"_set_c", comm_set_c, METH_VARARGS, "Set the hpml_comm_t address (0: freed) and size."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CommBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hpml._fast.CommBase",
    .tp_basicsize = sizeof(CommBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = PyDoc_STR("The compiled collectives of hpml.Comm (its base class)."),
    .tp_methods = comm_methods,
    .tp_new = PyType_GenericNew,
};

/* A collective bound to its buffers (Comm.allreduce_init, bcast_init): the arguments were
 * checked once in Python; a call is the C call alone. Holds the Comm and what must stay
 * alive (the buffers and their cffi exports). */
typedef struct {
    PyObject_HEAD CommBase *comm;
    PyObject *keep, *result, *what;
    int kind; /* 0 allreduce, 1 bcast */
    int algo, dt, op, root;
    const void *sp;
    void *rp;
    size_t n;
    vectorcallfunc vectorcall; /* bound_call: called without an argument tuple */
} Bound;

static void bound_dealloc(PyObject *op_self)
{
    Bound *b = (Bound *)op_self;

    Py_XDECREF(b->comm);
    Py_XDECREF(b->keep);
    Py_XDECREF(b->result);
    Py_XDECREF(b->what);
    Py_TYPE(op_self)->tp_free(op_self);
}

static PyObject *bound_call(PyObject *op_self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    Bound *b = (Bound *)op_self;
    void *c = b->comm->c;

    (void)args;
    if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "a prepared %U takes no arguments", b->what);
        return NULL;
    }
    if (c == NULL) /* freed: Comm._handle() raises hpml's error */
        return PyObject_CallMethod((PyObject *)b->comm, "_handle", NULL);
    PyThreadState *ts = PyEval_SaveThread();
    int rc = b->kind == 0 ? g_allreduce(b->algo, b->sp, b->rp, b->n, b->dt, b->op, c)
                          : g_bcast(b->algo, b->rp, b->n, b->dt, b->root, c);
    PyEval_RestoreThread(ts);
    if (rc)
        return raise_rc(rc, b->what);
    Py_RETURN_NONE;
}

static PyMemberDef bound_members[] = {
    {"result", T_OBJECT, offsetof(Bound, result), READONLY, "the buffer the result goes to"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hpml._fast.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = PyDoc_STR("A collective bound to its buffers: calling it runs it once "
                        "(blocking, collective); `result` is the output buffer."),
    .tp_members = bound_members,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = bound_dealloc,
};

/* bound(comm, kind, algo, send_address, recv_address, count, dtype, op, root, keep,
 *       result, what): a Bound (addresses as integers; bcast: recv_address is the
 *       buffer). */
static PyObject *fast_bound(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *comm, *keep, *result, *what;
    int kind, algo, dt, op, root;
    unsigned long long sp, rp, n;

    if (!PyArg_ParseTuple(args, "O!iiKKKiiiOOU", &CommBaseType, &comm, &kind, &algo, &sp, &rp, &n,
                          &dt, &op, &root, &keep, &result, &what))
        return NULL;
    if ((kind != 0 && kind != 1) || g_allreduce == NULL) {
        PyErr_SetString(PyExc_ValueError, "hpml._fast.bound: bad kind, or setup() not run");
        return NULL;
    }
    Bound *b = PyObject_New(Bound, &BoundType);
    if (b == NULL)
        return NULL;
    Py_INCREF(comm);
    Py_INCREF(keep);
    Py_INCREF(result);
    Py_INCREF(what);
    b->comm = (CommBase *)comm;
    b->keep = keep;
    b->result = result;
    b->what = what;
    b->kind = kind;
    b->algo = algo;
    b->dt = dt;
    b->op = op;
    b->root = root;
    b->sp = (const void *)(uintptr_t)sp;
    b->rp = (void *)(uintptr_t)rp;
    b->n = (size_t)n;
    b->vectorcall = bound_call;
    return (PyObject *)b;
}

/* setup(allreduce_addr, bcast_addr, in_place, ops, dtypes, allreduce_algos, bcast_algos,
 *       slow_allreduce, slow_bcast, raise_error) */
static PyObject *fast_setup(PyObject *mod, PyObject *args)
{
    (void)mod;
    unsigned long long ar, bc;
    PyObject *in_place, *ops, *dts, *aa, *ba, *sa, *sb, *re;
    if (!PyArg_ParseTuple(args, "KKOO!O!O!O!OOO", &ar, &bc, &in_place, &PyDict_Type, &ops,
                          &PyDict_Type, &dts, &PyDict_Type, &aa, &PyDict_Type, &ba, &sa, &sb, &re))
        return NULL;
    if (!ar || !bc || !PyCallable_Check(sa) || !PyCallable_Check(sb) || !PyCallable_Check(re)) {
        PyErr_SetString(PyExc_ValueError, "hpml._fast.setup: null address or not callable");
        return NULL;
    }
    PyObject **slots[] = {&g_in_place,        &g_ops,         &g_dtypes,
                          &g_allreduce_algos, &g_bcast_algos, &g_slow_allreduce,
                          &g_slow_bcast,      &g_raise_error};
    PyObject *vals[] = {in_place, ops, dts, aa, ba, sa, sb, re};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        Py_INCREF(vals[i]);
        Py_XSETREF(*slots[i], vals[i]);
    }
    memo_t *memos[] = {&m_ops, &m_dtypes, &m_allreduce_algos, &m_bcast_algos};
    for (size_t i = 0; i < sizeof memos / sizeof memos[0]; i++)
        Py_CLEAR(memos[i]->name);
    g_allreduce = (allreduce_fn)(uintptr_t)ar;
    g_bcast = (bcast_fn)(uintptr_t)bc;
    Py_RETURN_NONE;
}

static PyMethodDef fast_methods[] = {
    {"setup", fast_setup, METH_VARARGS, "Give the module libhpml's functions and the tables."},
    {"bound", fast_bound, METH_VARARGS, "A collective bound to checked arguments (a Bound)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT,
    "hpml._fast",
    "The compiled hot path of hpml.Comm.",
    -1,
    fast_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__fast(void);
PyMODINIT_FUNC PyInit__fast(void)
{
    import_array(); /* NumPy's C API (returns NULL on failure) */
    if (PyType_Ready(&CommBaseType) < 0 || PyType_Ready(&BoundType) < 0)
        return NULL;
    g_str_allreduce = PyUnicode_InternFromString("allreduce");
    g_str_bcast = PyUnicode_InternFromString("bcast");
    if (g_str_allreduce == NULL || g_str_bcast == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&fast_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddType(m, &CommBaseType) < 0 || PyModule_AddType(m, &BoundType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
