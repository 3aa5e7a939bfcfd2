/* tile_cuda._fastcall: one Kernel call for one argument signature, in C.
 *
 * A FastCall is built by the launcher (tile_cuda/launcher.py, `bind_call`) from the first call of
 * a signature that passed tilecore's checks. Each later call reads every input through the array
 * library's DLPack C exchange API (`__dlpack_c_exchange_api__`: data pointer, dtype, shape,
 * strides and device without a Python call), compares them with that first call's, allocates the
 * outputs with the Kernel's allocators, asks the library for its current stream, packs the
 * kernel parameters on the C stack and calls cuLaunchKernel through a function pointer handed in
 * from Python (no CUDA headers or libraries are needed to build this file).
 *
 * Anything that differs from the recorded signature, a misaligned pointer, a failed allocation
 * and a failed launch all go to `fallback(inputs)`: the Kernel's checked Python path, which
 * raises the right error or remembers the new signature. So this file holds no error messages.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The DLPack 1.x ABI (dlpack.h), the part read here. */
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct ManagedTensor {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct ManagedTensor *self);
  uint64_t flags;
  DLTensor dl_tensor;
} ManagedTensor;
typedef struct ExchangeHeader { DLPackVersion version; struct ExchangeHeader *prev_api; } ExchangeHeader;
typedef struct {
  ExchangeHeader header;
  int (*managed_tensor_allocator)(DLTensor *prototype, ManagedTensor **out, void *error_ctx,
                                  void (*set_error)(void *error_ctx, const char *kind, const char *message));
  void *managed_tensor_from_py_object_no_sync;
  int (*managed_tensor_to_py_object_no_sync)(ManagedTensor *tensor, void **out_py_object);
  int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} ExchangeAPI;

enum { kDLCPU = 1, MAX_POSITIONS = 64, MAX_DIMS = 8 };

typedef int (*LaunchFn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void *stream, void **params, void **extra);
/* cuTensorMapReplaceAddress: a TMA tensor map parameter with another global address */
typedef int (*ReplaceAddressFn)(void *tensor_map, void *address);
#define MAX_MAPS 8
#define MAP_BYTES 128
#define MAP_ALIGN 128  /* cuda.h declares CUtensorMap alignas(128) */

/* What one argument position must look like. */
typedef struct {
  PyTypeObject *type;          /* exact type (a strong reference) */
  const ExchangeAPI *api;
  DLDataType dtype;
  DLDevice device;
  int32_t ndim;
  int64_t shape[MAX_DIMS];
} Expected;

typedef struct {
  PyObject_HEAD
  LaunchFn launch;
  void *function;
  unsigned grid[3], block[3], smem;
  uint64_t misaligned_mask;
  Py_ssize_t n_inputs, n_outputs, n_params;
  int input_position[MAX_POSITIONS];     /* inputs[i] -> argument position */
  int output_position[MAX_POSITIONS];    /* outputs[j] -> argument position */
  PyObject *allocators[MAX_POSITIONS];   /* outputs[j]() allocates it */
  int uninitialised[MAX_POSITIONS];      /* outputs[j] may be allocated by the array library's C API */
  Expected expected[MAX_POSITIONS];      /* per argument position */
  int param_position[MAX_POSITIONS];     /* kernel parameter k: argument position, or -1 for a scalar */
  uint64_t param_value[MAX_POSITIONS];   /* the scalar's value (little-endian: int32 reads the low half) */
  int param_map[MAX_POSITIONS];          /* kernel parameter k: its TMA tensor map, or -1 */
  ReplaceAddressFn replace_address;
  Py_ssize_t n_maps;
  unsigned char map_storage[MAX_MAPS * MAP_BYTES + MAP_ALIGN];
  unsigned char *maps;                   /* MAP_ALIGN-aligned, in map_storage: map m at maps + m * MAP_BYTES */
  void *map_address[MAX_MAPS];           /* the global address map m holds */
  PyObject *fallback;
} FastCall;

static const ExchangeAPI *exchange_api(PyTypeObject *type) {
  static const char *names[] = {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"};
  for (int i = 0; i < 2; i++) {
    PyObject *value = PyObject_GetAttrString((PyObject *)type, names[i]);
    if (value == NULL) { PyErr_Clear(); continue; }
    const ExchangeAPI *api = NULL;
    if (PyCapsule_CheckExact(value)) api = PyCapsule_GetPointer(value, PyCapsule_GetName(value));
    else if (PyLong_Check(value)) api = PyLong_AsVoidPtr(value);
    Py_DECREF(value);
    if (api == NULL) { PyErr_Clear(); continue; }
    if (api->header.version.major == 1 && api->dltensor_from_py_object_no_sync != NULL &&
        api->current_work_stream != NULL)
      return api;
  }
  return NULL;
}

/* Torch's rule: dims of extent 1 may have any stride; an empty tensor is contiguous. */
static int contiguous(const DLTensor *t) {
  int64_t want = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] == 0) return 1;
    if (t->shape[d] != 1 && t->strides != NULL && t->strides[d] != want) return 0;
    want *= t->shape[d];
  }
  return 1;
}

/* The data pointer of `obj` if it matches `e` exactly, else NULL with *ok = 0. */
static void *matching_pointer(PyObject *obj, const Expected *e, uint64_t mask, int *ok) {
  DLTensor t;
  *ok = 0;
  if (Py_TYPE(obj) != e->type) return NULL;
  if (e->api->dltensor_from_py_object_no_sync(obj, &t) != 0) { PyErr_Clear(); return NULL; }
  if (t.ndim != e->ndim || t.dtype.code != e->dtype.code || t.dtype.bits != e->dtype.bits ||
      t.dtype.lanes != e->dtype.lanes || t.device.device_type != e->device.device_type ||
      t.device.device_id != e->device.device_id ||
      memcmp(t.shape, e->shape, sizeof(int64_t) * (size_t)t.ndim) != 0 || !contiguous(&t))
    return NULL;
  char *p = (char *)t.data + t.byte_offset;
  if ((uint64_t)(uintptr_t)p & mask) return NULL;
  *ok = 1;
  return p;
}

static int record(Expected *e, PyObject *obj) {
  DLTensor t;
  e->api = exchange_api(Py_TYPE(obj));
  if (e->api == NULL) {
    PyErr_Format(PyExc_TypeError, "%s offers no DLPack C exchange API", Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (e->api->dltensor_from_py_object_no_sync(obj, &t) != 0) return -1;
  if (t.ndim > MAX_DIMS || !contiguous(&t)) {
    PyErr_SetString(PyExc_ValueError, "more than 8 dimensions, or not contiguous");
    return -1;
  }
  e->type = Py_TYPE(obj);
  Py_INCREF(e->type);
  e->dtype = t.dtype;
  e->device = t.device;
  e->ndim = t.ndim;
  memcpy(e->shape, t.shape, sizeof(int64_t) * (size_t)t.ndim);
  return 0;
}

static void set_allocation_error(void *error_ctx, const char *kind, const char *message) {
  (void)error_ctx;
  PyErr_Format(PyExc_RuntimeError, "%s: %s", kind, message);
}

/* An uninitialised array shaped like `e`, from the array library's C allocator (no Python call). */
static PyObject *allocate_uninitialised(const Expected *e) {
  DLTensor prototype;
  ManagedTensor *made = NULL;
  void *result = NULL;
  memset(&prototype, 0, sizeof prototype);
  prototype.device = e->device;
  prototype.ndim = e->ndim;
  prototype.dtype = e->dtype;
  prototype.shape = (int64_t *)e->shape;
  if (e->api->managed_tensor_allocator(&prototype, &made, NULL, set_allocation_error) != 0 || made == NULL)
    return NULL;
  if (e->api->managed_tensor_to_py_object_no_sync(made, &result) != 0) {
    if (made->deleter != NULL) made->deleter(made);
    return NULL;
  }
  return (PyObject *)result;
}

static PyObject *call_fallback(FastCall *self, PyObject *inputs) {
  return PyObject_CallOneArg(self->fallback, inputs);
}

static PyObject *fastcall_call(FastCall *self, PyObject *args, PyObject *kwargs) {
  PyObject *inputs, *outputs[MAX_POSITIONS];
  void *pointers[MAX_POSITIONS], *argv[MAX_POSITIONS], *stream = NULL;
  uint64_t slots[MAX_POSITIONS];
  Py_ssize_t i, made = 0;
  int ok;
  if (kwargs != NULL || PyTuple_GET_SIZE(args) != 1) {
    PyErr_SetString(PyExc_TypeError, "FastCall takes one tuple of inputs");
    return NULL;
  }
  inputs = PyTuple_GET_ITEM(args, 0);
  if (self->fallback == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "FastCall was cleared");
    return NULL;
  }
  if (!PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) != self->n_inputs) return call_fallback(self, inputs);
  for (i = 0; i < self->n_inputs; i++) {
    int pos = self->input_position[i];
    pointers[pos] = matching_pointer(PyTuple_GET_ITEM(inputs, i), &self->expected[pos], self->misaligned_mask, &ok);
    if (!ok) return call_fallback(self, inputs);
  }
  for (made = 0; made < self->n_outputs; made++) {
    int pos = self->output_position[made];
    outputs[made] = self->uninitialised[made] ? allocate_uninitialised(&self->expected[pos])
                                              : PyObject_CallNoArgs(self->allocators[made]);
    if (outputs[made] == NULL) { PyErr_Clear(); goto miss; }
    pointers[pos] = matching_pointer(outputs[made], &self->expected[pos], self->misaligned_mask, &ok);
    if (!ok) { made++; goto miss; }
  }
  if (self->expected[0].device.device_type != kDLCPU &&
      self->expected[0].api->current_work_stream(self->expected[0].device.device_type,
                                                 self->expected[0].device.device_id, &stream) != 0) {
    PyErr_Clear();
    goto miss;
  }
  for (i = 0; i < self->n_params; i++) {
    int pos = self->param_position[i], m = self->param_map[i];
    if (m >= 0) {  /* a tensor map: the signature's, with this call's address */
      unsigned char *map = self->maps + m * MAP_BYTES;
      if (self->map_address[m] != pointers[pos]) {
        if (self->replace_address(map, pointers[pos]) != 0) goto miss;
        self->map_address[m] = pointers[pos];
      }
      argv[i] = map;
      continue;
    }
    slots[i] = pos >= 0 ? (uint64_t)(uintptr_t)pointers[pos] : self->param_value[i];
    argv[i] = &slots[i];
  }
  if (self->launch(self->function, self->grid[0], self->grid[1], self->grid[2], self->block[0],
                   self->block[1], self->block[2], self->smem, stream, argv, NULL) != 0)
    goto miss;  /* the checked path launches again and reports the driver's error */
  if (self->n_outputs == 0) Py_RETURN_NONE;
  if (self->n_outputs == 1) return outputs[0];
  PyObject *result = PyTuple_New(self->n_outputs);
  if (result == NULL) goto miss;
  for (i = 0; i < self->n_outputs; i++) PyTuple_SET_ITEM(result, i, outputs[i]);
  return result;
miss:
  for (i = 0; i < made; i++) Py_XDECREF(outputs[i]);
  return call_fallback(self, inputs);
}

static int unsigned_triple(PyObject *seq, unsigned out[3]) {
  if (!PyArg_ParseTuple(seq, "III", &out[0], &out[1], &out[2])) return -1;
  return 0;
}

/* FastCall(launch, function, grid, block, smem, alignment, arguments, input_positions,
 *          outputs, params, fallback[, replace_address])
 *   launch: address of cuLaunchKernel (or a stand-in with its signature); function: CUfunction;
 *   grid, block: 3-tuples; arguments: the first call's arrays in parameter order;
 *   input_positions: the argument position of each input; outputs: ((position, allocator[,
 *   uninitialised]), ...): with uninitialised true, the array library's own C allocator is used
 *   instead of allocator() (the same array without a Python call; only for outputs that need no fill);
 *   params: per kernel parameter, ("ptr", position), ("scalar", value) or ("tmap", position, map): a
 *   TMA tensor map (128 bytes, encoded for the first call's array at that position) passed by value,
 *   its address replaced through replace_address (cuTensorMapReplaceAddress) when an array moves;
 *   fallback(inputs): what any other call runs. */
static int fastcall_init(FastCall *self, PyObject *args, PyObject *kwargs) {
  (void)kwargs;
  unsigned long long launch, function, alignment, replace_address = 0;
  PyObject *grid, *block, *arguments, *input_positions, *outputs, *params, *fallback;
  Py_ssize_t i;
  if (self->fallback != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "FastCall is initialized once");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "KKO!O!IKO!O!O!O!O|K", &launch, &function, &PyTuple_Type, &grid, &PyTuple_Type,
                        &block, &self->smem, &alignment, &PyTuple_Type, &arguments, &PyTuple_Type,
                        &input_positions, &PyTuple_Type, &outputs, &PyTuple_Type, &params, &fallback,
                        &replace_address))
    return -1;
  self->replace_address = (ReplaceAddressFn)(uintptr_t)replace_address;
  self->maps = (unsigned char *)(((uintptr_t)self->map_storage + MAP_ALIGN - 1) & ~(uintptr_t)(MAP_ALIGN - 1));
  if (unsigned_triple(grid, self->grid) || unsigned_triple(block, self->block)) return -1;
  if (PyTuple_GET_SIZE(arguments) > MAX_POSITIONS || PyTuple_GET_SIZE(params) > MAX_POSITIONS ||
      PyTuple_GET_SIZE(arguments) == 0) {
    PyErr_SetString(PyExc_ValueError, "between 1 and 64 arguments and at most 64 parameters");
    return -1;
  }
  self->launch = (LaunchFn)(uintptr_t)launch;
  self->function = (void *)(uintptr_t)function;
  self->misaligned_mask = alignment - 1;
  for (i = 0; i < PyTuple_GET_SIZE(arguments); i++)
    if (record(&self->expected[i], PyTuple_GET_ITEM(arguments, i))) return -1;
  Py_ssize_t n_arguments = PyTuple_GET_SIZE(arguments);
  self->n_inputs = PyTuple_GET_SIZE(input_positions);
  if (self->n_inputs > n_arguments) {
    PyErr_SetString(PyExc_ValueError, "more inputs than arguments");
    return -1;
  }
  for (i = 0; i < self->n_inputs; i++) {
    long pos = PyLong_AsLong(PyTuple_GET_ITEM(input_positions, i));
    if (pos < 0 || pos >= n_arguments) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "input position out of range");
      return -1;
    }
    self->input_position[i] = (int)pos;
  }
  self->n_outputs = PyTuple_GET_SIZE(outputs);
  if (self->n_inputs + self->n_outputs != n_arguments) {
    PyErr_SetString(PyExc_ValueError, "inputs and outputs must make up the arguments");
    return -1;
  }
  for (i = 0; i < self->n_outputs; i++) {
    PyObject *allocator;
    int uninitialised = 0;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(outputs, i), "iO|p", &self->output_position[i], &allocator,
                          &uninitialised))
      return -1;
    if (self->output_position[i] < 0 || self->output_position[i] >= n_arguments) {
      PyErr_SetString(PyExc_ValueError, "output position out of range");
      return -1;
    }
    Py_INCREF(allocator);
    self->allocators[i] = allocator;
    const ExchangeAPI *api = self->expected[self->output_position[i]].api;
    self->uninitialised[i] = uninitialised && api->managed_tensor_allocator != NULL &&
                             api->managed_tensor_to_py_object_no_sync != NULL;
  }
  self->n_params = PyTuple_GET_SIZE(params);
  for (i = 0; i < self->n_params; i++) {
    const char *kind, *map = NULL;
    long long value;
    Py_ssize_t map_len = 0;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, i), "sL|y#", &kind, &value, &map, &map_len)) return -1;
    int is_map = strcmp(kind, "tmap") == 0;
    self->param_position[i] = strcmp(kind, "ptr") == 0 || is_map ? (int)value : -1;
    self->param_map[i] = -1;
    if (self->param_position[i] >= n_arguments || (self->param_position[i] < 0 && strcmp(kind, "scalar"))) {
      PyErr_SetString(PyExc_ValueError,
                      "a parameter is (\"ptr\", argument position), (\"scalar\", value) or (\"tmap\", position, map)");
      return -1;
    }
    if (is_map) {
      if (map == NULL || map_len != MAP_BYTES || self->n_maps == MAX_MAPS || self->replace_address == NULL) {
        PyErr_SetString(PyExc_ValueError, "a tensor map is 128 bytes, at most 8, and needs replace_address");
        return -1;
      }
      self->param_map[i] = (int)self->n_maps;
      memcpy(self->maps + self->n_maps * MAP_BYTES, map, MAP_BYTES);
      self->map_address[self->n_maps] = NULL;  /* replaced on the first call */
      self->n_maps++;
    }
    self->param_value[i] = (uint64_t)value;
  }
  if (PyErr_Occurred()) return -1;
  Py_INCREF(fallback);
  self->fallback = fallback;
  return 0;
}

/* The fallback is usually a bound method of the Kernel that holds this object: a cycle, so the
 * type takes part in garbage collection. */
static int fastcall_traverse(FastCall *self, visitproc visit, void *arg) {
  for (int i = 0; i < MAX_POSITIONS; i++) {
    Py_VISIT(self->expected[i].type);
    Py_VISIT(self->allocators[i]);
  }
  Py_VISIT(self->fallback);
  return 0;
}

static int fastcall_clear(FastCall *self) {
  for (int i = 0; i < MAX_POSITIONS; i++) {
    Py_CLEAR(self->expected[i].type);
    Py_CLEAR(self->allocators[i]);
  }
  Py_CLEAR(self->fallback);
  self->n_inputs = self->n_outputs = 0;  /* a cleared object only ever falls back (and has nothing to call) */
  return 0;
}

static void fastcall_dealloc(FastCall *self) {
  PyObject_GC_UnTrack(self);
  fastcall_clear(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tile_cuda._fastcall.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One Kernel call for one argument signature (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fastcall_init,
    .tp_call = (ternaryfunc)fastcall_call,
    .tp_dealloc = (destructor)fastcall_dealloc,
    .tp_traverse = (traverseproc)fastcall_traverse,
    .tp_clear = (inquiry)fastcall_clear,
};

static PyObject *has_exchange_api(PyObject *module, PyObject *type) {
  (void)module;
  if (!PyType_Check(type)) { PyErr_SetString(PyExc_TypeError, "expected a type"); return NULL; }
  return PyBool_FromLong(exchange_api((PyTypeObject *)type) != NULL);
}

static PyMethodDef methods[] = {
    {"has_exchange_api", has_exchange_api, METH_O,
     "Whether arrays of this type offer a usable DLPack C exchange API."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastcall",
                                    "Kernel calls specialized per argument signature, in C.", -1, methods};

PyMODINIT_FUNC PyInit__fastcall(void) {
  if (PyType_Ready(&FastCallType) < 0) return NULL;
  PyObject *m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  Py_INCREF(&FastCallType);
  if (PyModule_AddObject(m, "FastCall", (PyObject *)&FastCallType) < 0) {
    Py_DECREF(&FastCallType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
