// Janus>PyGetAttr, Janus>PySetAttr, Janus>PyGetSubscr, Janus>PySetSubscr:
// graph access to Python heap objects (JANUS paper §4.2.3, Figure 5).
//
// A converted function reads and writes `obj.name` and `obj[key]` of objects
// that live on the Python heap. The graph refers to an object by an int64
// handle (janus.heap.heap.HandleRegistry) and to one graph run by an int64
// run id that the executor feeds on every call. Gets read the run's shadow
// copy of (object, name/key) if the run wrote one, else the real object; sets
// write only the shadow copy. After the run, the executor commits the shadows
// to the real objects (all or nothing) or discards them. The bookkeeping and
// the conversion of Python values to arrays live in janus/heap/heap.py;
// these kernels only take the GIL, call it, and copy bytes in or out, so the
// semantics are in one place and testable from Python.
//
// Every Python helper raises janus.heap.heap.DeadObjectError (the message
// carries JANUS_HEAP_DEAD_OBJECT) when a handle's object is gone: mapped to
// FAILED_PRECONDITION; any other Python exception becomes INVALID_ARGUMENT.
// No Python error ever escapes as a crash.
//
// Every kernel holds the GIL while it touches Python, so heap ops of one
// graph run one at a time however many inter-op threads TF gives them (the
// paper's deferred writes bypass the GIL; here writes go to Python-side
// shadow tables, which keeps commit/discard simple, at that price).
//
// The library now needs the Python C API: it must be loaded into a Python
// process (tf.load_op_library from janus.graph.ops), whose interpreter
// provides the Py* symbols; it is deliberately not linked to libpython, like
// any CPython extension module.

// Python.h first: it sets feature macros that the standard headers read.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"

namespace janus {

using ::tensorflow::DataType;
using ::tensorflow::DataTypeString;
using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// Every dtype a Python number, bool, NumPy array or eager tensor converts to
// byte for byte. Strings, resources and variants have no flat buffer: out of
// scope, rejected when the graph is built.
#define JANUS_HEAP_DTYPES                                                 \
  "{bool, half, bfloat16, float, double, int8, int16, int32, int64, "     \
  "uint8, uint16, uint32, uint64, complex64, complex128}"

constexpr char kHeapModule[] = "janus.heap.heap";

// Copies at least this large run with the GIL released: holding it through a
// multi-megabyte memcpy would stall every Python thread; for small values a
// second GIL round trip costs more than the copy.
constexpr Py_ssize_t kReleaseGilBytes = 1 << 20;

// ---------------------------------------------------------------- shape fns

absl::Status ScalarIds(InferenceContext* c) {
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));  // run_id
  return c->WithRank(c->input(1), 0, &unused);               // handle
}

// Gets: the shape the graph was specialized for (the `shape` attr), which
// may be partially known; the kernel checks the value against it.
absl::Status GetShapeFn(InferenceContext* c) {
  TF_RETURN_IF_ERROR(ScalarIds(c));
  if (c->num_inputs() > 2) {  // PyGetSubscr's key
    ShapeHandle unused;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &unused));
  }
  PartialTensorShape shape;
  TF_RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->MakeShapeFromPartialTensorShape(shape, &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

// Sets: no outputs; only the scalar ids (and key) are checked.
absl::Status SetShapeFn(InferenceContext* c) {
  TF_RETURN_IF_ERROR(ScalarIds(c));
  if (c->num_inputs() > 3) {  // PySetSubscr's key
    ShapeHandle unused;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &unused));
  }
  return absl::OkStatus();
}

}  // namespace

// All four are stateful: their results depend on (and sets change) state the
// graph cannot see, so they must never be pruned, constant-folded, hoisted or
// deduplicated (two gets of one attribute around a set differ), and
// tf.function's automatic control dependencies always run the sets, which
// have no outputs for anything to depend on.
REGISTER_OP("Janus>PyGetAttr")
    .Input("run_id: int64")
    .Input("handle: int64")
    .Output("value: dtype")
    .Attr("attr_name: string")
    .Attr("dtype: " JANUS_HEAP_DTYPES)
    .Attr("shape: shape = { unknown_rank: true }")
    .SetIsStateful()
    .SetShapeFn(GetShapeFn);

// The attribute's name is the `attr_name` attr: an attr called `name` would
// clash with the `name` argument of every generated Python op wrapper (and
// tf.load_op_library fails on the whole library).
// No outputs: the graph orders later reads after the write with a control
// edge on the returned Operation.
REGISTER_OP("Janus>PySetAttr")
    .Input("run_id: int64")
    .Input("handle: int64")
    .Input("value: T")
    .Attr("attr_name: string")
    .Attr("T: " JANUS_HEAP_DTYPES)
    .SetIsStateful()
    .SetShapeFn(SetShapeFn);

REGISTER_OP("Janus>PyGetSubscr")
    .Input("run_id: int64")
    .Input("handle: int64")
    .Input("key: Tkey")
    .Output("value: dtype")
    .Attr("Tkey: {int32, int64, string}")
    .Attr("dtype: " JANUS_HEAP_DTYPES)
    .Attr("shape: shape = { unknown_rank: true }")
    .SetIsStateful()
    .SetShapeFn(GetShapeFn);

REGISTER_OP("Janus>PySetSubscr")
    .Input("run_id: int64")
    .Input("handle: int64")
    .Input("key: Tkey")
    .Input("value: T")
    .Attr("Tkey: {int32, int64, string}")
    .Attr("T: " JANUS_HEAP_DTYPES)
    .SetIsStateful()
    .SetShapeFn(SetShapeFn);

namespace {

// ------------------------------------------------------------ Python access

// Holds the GIL for its lifetime. PyGILState works on TF's inter-op threads
// (which have never run Python: it creates their thread state) and on a
// Python thread that released the GIL around the TF call; it nests when the
// thread already holds it (an eager op may run inline on the caller).
// PyGILState_Release deletes a thread state it created once its count drops
// to zero, so every call on an inter-op thread would create and tear down a
// thread state (measured: ~20 us of a ~24 us get); one extra, never released
// Ensure per such thread keeps it (a few KB per pool thread, cleared with
// the interpreter).
class GilHold {
 public:
  GilHold() {
    const bool first_on_thread = PyGILState_GetThisThreadState() == nullptr;
    state_ = PyGILState_Ensure();
    if (first_on_thread) PyGILState_Ensure();  // keeps the thread state
  }
  ~GilHold() { PyGILState_Release(state_); }
  GilHold(const GilHold&) = delete;
  GilHold& operator=(const GilHold&) = delete;

 private:
  PyGILState_STATE state_;
};

// An owned reference. Must be destroyed under the GIL: declare it after the
// GilHold in the same scope, so it is destroyed first.
struct PyDecref {
  void operator()(PyObject* object) const { Py_DECREF(object); }
};
using PyPtr = std::unique_ptr<PyObject, PyDecref>;

// Releases an exported buffer on every path out of a scope (under the GIL,
// for the same reason as PyPtr).
class BufferHold {
 public:
  BufferHold() { view_.obj = nullptr; }
  ~BufferHold() {
    if (view_.obj != nullptr) PyBuffer_Release(&view_);
  }
  Py_buffer* get() { return &view_; }

 private:
  Py_buffer view_;
};

bool PythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Taking the GIL once the interpreter is gone (or going) would crash or
// park this TF thread forever; the op fails instead.
absl::Status CheckPythonAlive() {
  if (!Py_IsInitialized() || PythonFinalizing()) {
    return absl::FailedPreconditionError(
        "the Python interpreter is not running (finalizing?): Janus heap "
        "ops need it");
  }
  return absl::OkStatus();
}

// The helpers of janus/heap/heap.py that the kernels call.
struct HeapFunctions {
  PyObject* read_attr = nullptr;
  PyObject* read_item = nullptr;
  PyObject* write_attr = nullptr;
  PyObject* write_item = nullptr;
  PyObject* dead_error = nullptr;  // exception class -> FAILED_PRECONDITION
};

// Turns the pending Python exception into a Status, and clears it.
absl::Status PythonErrorStatus(const std::string& context,
                               PyObject* dead_error) {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  std::string text = "(no message)";
  if (value != nullptr) {
    PyObject* str = PyObject_Str(value);
    const char* utf8 = str != nullptr ? PyUnicode_AsUTF8(str) : nullptr;
    if (utf8 != nullptr) text = utf8;
    Py_XDECREF(str);
    PyErr_Clear();  // a failing __str__ must not leave an error behind
  }
  std::string type_name =
      type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name
                      : "unknown Python error";
  const bool dead = type != nullptr && dead_error != nullptr &&
                    PyErr_GivenExceptionMatches(type, dead_error);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  std::string message = absl::StrCat(context, ": ", type_name, ": ", text);
  return dead ? absl::FailedPreconditionError(message)
              : absl::InvalidArgumentError(message);
}

// Looks the helpers up once and keeps them for the life of the process (a
// kernel may run at any time until exit). Call with the GIL held; the GIL is
// also what guards the cache. The import can release the GIL, so two threads
// may both import: the second keeps the first's lookup.
absl::Status GetHeapFunctions(const HeapFunctions** out) {
  static HeapFunctions cached;
  static bool ready = false;
  if (!ready) {
    PyPtr module(PyImport_ImportModule(kHeapModule));
    if (module == nullptr) {
      return PythonErrorStatus(absl::StrCat("importing ", kHeapModule),
                               nullptr);
    }
    HeapFunctions found;
    PyObject** slots[] = {&found.read_attr, &found.read_item,
                          &found.write_attr, &found.write_item,
                          &found.dead_error};
    const char* names[] = {"_read_attr", "_read_item", "_write_attr",
                           "_write_item", "DeadObjectError"};
    for (int i = 0; i < 5; ++i) {
      *slots[i] = PyObject_GetAttrString(module.get(), names[i]);
      if (*slots[i] == nullptr) {
        for (int j = 0; j < i; ++j) Py_DECREF(*slots[j]);
        return PythonErrorStatus(
            absl::StrCat("looking up ", kHeapModule, ".", names[i]), nullptr);
      }
    }
    if (ready) {  // another thread finished first while we imported
      for (PyObject** slot : slots) Py_DECREF(*slot);
    } else {
      cached = found;
      ready = true;
    }
  }
  *out = &cached;
  return absl::OkStatus();
}

// A key tensor as the Python key it stands for: int, or str (bytes if the
// string is not UTF-8, as the user's dict may be keyed by bytes).
PyObject* KeyToPython(const Tensor& key) {
  switch (key.dtype()) {
    case tensorflow::DT_INT32:
      return PyLong_FromLong(key.scalar<tensorflow::int32>()());
    case tensorflow::DT_INT64:
      return PyLong_FromLongLong(key.scalar<tensorflow::int64>()());
    default: {
      const tensorflow::tstring& s = key.scalar<tensorflow::tstring>()();
      PyObject* text = PyUnicode_DecodeUTF8(s.data(), s.size(), "strict");
      if (text != nullptr) return text;
      PyErr_Clear();
      return PyBytes_FromStringAndSize(s.data(), s.size());
    }
  }
}

std::string KeyLabel(const Tensor& key) {
  if (key.dtype() == tensorflow::DT_STRING) {
    return absl::StrCat("['", std::string(key.scalar<tensorflow::tstring>()()),
                        "']");
  }
  if (key.dtype() == tensorflow::DT_INT32) {
    return absl::StrCat("[", key.scalar<tensorflow::int32>()(), "]");
  }
  return absl::StrCat("[", key.scalar<tensorflow::int64>()(), "]");
}

PyObject* ShapeTuple(const TensorShape& shape) {
  PyObject* dims = PyTuple_New(shape.dims());
  if (dims == nullptr) return nullptr;
  for (int i = 0; i < shape.dims(); ++i) {
    PyObject* dim = PyLong_FromLongLong(shape.dim_size(i));
    if (dim == nullptr) {
      Py_DECREF(dims);
      return nullptr;
    }
    PyTuple_SET_ITEM(dims, i, dim);  // steals the reference
  }
  return dims;
}

// Copies the C-contiguous array returned by a read helper into output 0,
// checking it against the dtype and the (partial) shape the graph expects.
// Call with the GIL held.
absl::Status CopyArrayToOutput(OpKernelContext* ctx, PyObject* array,
                               DataType dtype,
                               const PartialTensorShape& expected,
                               const std::string& label) {
  BufferHold buffer;
  Py_buffer* view = buffer.get();
  if (PyObject_GetBuffer(array, view, PyBUF_C_CONTIGUOUS) != 0) {
    return PythonErrorStatus(label, nullptr);
  }
  std::vector<int64_t> dims(view->shape, view->shape + view->ndim);
  TensorShape shape;
  TF_RETURN_IF_ERROR(TensorShapeUtils::MakeShape(dims, &shape));
  // heap.py converts to `dtype` already; this guards against a helper bug
  // turning into an out-of-bounds copy.
  const Py_ssize_t item_size = tensorflow::DataTypeSize(dtype);
  if (view->itemsize != item_size ||
      view->len != shape.num_elements() * item_size) {
    return absl::InternalError(absl::StrCat(
        label, ": the heap helper returned ", view->len, " bytes of ",
        view->itemsize, "-byte items for shape ", shape.DebugString(),
        ", expected ", DataTypeString(dtype)));
  }
  if (!expected.IsCompatibleWith(shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JANUS_HEAP_MISMATCH: ", label, " has shape ", shape.DebugString(),
        " but the graph was specialized for shape ", expected.DebugString()));
  }
  Tensor* output = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(0, shape, &output));
  if (view->len == 0) return absl::OkStatus();
  if (view->len >= kReleaseGilBytes) {
    // The exported buffer pins the array's memory while the GIL is released.
    Py_BEGIN_ALLOW_THREADS;
    std::memcpy(output->data(), view->buf, view->len);
    Py_END_ALLOW_THREADS;
  } else {
    std::memcpy(output->data(), view->buf, view->len);
  }
  return absl::OkStatus();
}


// ------------------------------------------------------------------ kernels

// What the four kernels share: the scalar inputs, the label naming the
// Python expression in errors, and the key passed to the heap helpers.
template <bool kSubscript>
class HeapOpBase : public OpKernel {
 public:
  explicit HeapOpBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    if (!kSubscript) OP_REQUIRES_OK(ctx, ctx->GetAttr("attr_name", &name_));
  }

 protected:
  // run_id, handle and (subscripts) key must be scalars; eager execution
  // skips the shape functions, so the kernel checks too.
  absl::Status ReadIds(OpKernelContext* ctx, int64_t* run_id,
                       int64_t* handle) const {
    static const char* const kNames[] = {"run_id", "handle", "key"};
    for (int i = 0; i < (kSubscript ? 3 : 2); ++i) {
      if (!TensorShapeUtils::IsScalar(ctx->input(i).shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            type_string(), ": input ", kNames[i], " must be a scalar, got ",
            ctx->input(i).shape().DebugString()));
      }
    }
    *run_id = ctx->input(0).scalar<tensorflow::int64>()();
    *handle = ctx->input(1).scalar<tensorflow::int64>()();
    return absl::OkStatus();
  }

  // E.g. "Janus>PyGetAttr .state (handle 3, run 7)": errors name what the
  // user's code accessed, so a mismatch can be traced to its source line.
  std::string Label(OpKernelContext* ctx, int64_t run_id,
                    int64_t handle) const {
    return absl::StrCat(type_string(), " ",
                        kSubscript ? KeyLabel(ctx->input(2))
                                   : absl::StrCat(".", name_),
                        " (handle ", handle, ", run ", run_id, ")");
  }

  // New reference, or nullptr with a Python error set. GIL held.
  PyObject* Key(OpKernelContext* ctx) const {
    if (kSubscript) return KeyToPython(ctx->input(2));
    return PyUnicode_FromStringAndSize(name_.data(), name_.size());
  }

 private:
  std::string name_;
};

// Gets: heap.py's _read_attr/_read_item return the run's shadow copy or the
// real value as a C-contiguous array of `dtype` (raising on a mismatch); the
// kernel copies its bytes into the output.
template <bool kSubscript>
class PyGetOp : public HeapOpBase<kSubscript> {
 public:
  explicit PyGetOp(OpKernelConstruction* ctx) : HeapOpBase<kSubscript>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shape", &shape_));
  }

  void Compute(OpKernelContext* ctx) override {
    int64_t run_id = 0, handle = 0;
    OP_REQUIRES_OK(ctx, this->ReadIds(ctx, &run_id, &handle));
    OP_REQUIRES_OK(ctx, CheckPythonAlive());
    const std::string label = this->Label(ctx, run_id, handle);
    GilHold gil;  // declared before every PyPtr: released after them
    const HeapFunctions* heap = nullptr;
    OP_REQUIRES_OK(ctx, GetHeapFunctions(&heap));
    PyPtr key(this->Key(ctx));
    OP_REQUIRES(ctx, key != nullptr, PythonErrorStatus(label, nullptr));
    PyObject* read = kSubscript ? heap->read_item : heap->read_attr;
    PyPtr array(PyObject_CallFunction(
        read, "LLOi", static_cast<long long>(run_id),
        static_cast<long long>(handle), key.get(), static_cast<int>(dtype_)));
    OP_REQUIRES(ctx, array != nullptr,
                PythonErrorStatus(label, heap->dead_error));
    OP_REQUIRES_OK(ctx, CopyArrayToOutput(ctx, array.get(), dtype_, shape_,
                                          label));
  }

 private:
  DataType dtype_;
  PartialTensorShape shape_;
};

// Sets: heap.py's _write_attr/_write_item copy the value's bytes into an
// array of their own and store it in the run's shadow copy; nothing on the
// real object changes until heap.commit(run_id).
template <bool kSubscript>
class PySetOp : public HeapOpBase<kSubscript> {
 public:
  using HeapOpBase<kSubscript>::HeapOpBase;

  void Compute(OpKernelContext* ctx) override {
    int64_t run_id = 0, handle = 0;
    OP_REQUIRES_OK(ctx, this->ReadIds(ctx, &run_id, &handle));
    OP_REQUIRES_OK(ctx, CheckPythonAlive());
    const Tensor& value = ctx->input(kSubscript ? 3 : 2);
    const std::string label = this->Label(ctx, run_id, handle);
    GilHold gil;  // declared before every PyPtr: released after them
    const HeapFunctions* heap = nullptr;
    OP_REQUIRES_OK(ctx, GetHeapFunctions(&heap));
    PyPtr key(this->Key(ctx));
    OP_REQUIRES(ctx, key != nullptr, PythonErrorStatus(label, nullptr));
    PyPtr shape(ShapeTuple(value.shape()));
    OP_REQUIRES(ctx, shape != nullptr, PythonErrorStatus(label, nullptr));
    // A read-only view of the tensor's bytes rather than a copy: the helper
    // copies them once, into the array it keeps.
    static char empty_bytes[1] = {0};
    const absl::string_view bytes = value.tensor_data();
    char* start = bytes.empty() ? empty_bytes : const_cast<char*>(bytes.data());
    PyPtr data(PyMemoryView_FromMemory(start, bytes.size(), PyBUF_READ));
    OP_REQUIRES(ctx, data != nullptr, PythonErrorStatus(label, nullptr));
    PyObject* write = kSubscript ? heap->write_item : heap->write_attr;
    PyPtr result(PyObject_CallFunction(
        write, "LLOiOO", static_cast<long long>(run_id),
        static_cast<long long>(handle), key.get(),
        static_cast<int>(value.dtype()), shape.get(), data.get()));
    absl::Status status = result != nullptr
                              ? absl::OkStatus()
                              : PythonErrorStatus(label, heap->dead_error);
    // TF may free or reuse the tensor's memory once Compute returns.
    // Releasing the view makes Python code that kept it fail rather than
    // read that memory; release() itself fails if an export of it is still
    // alive, which would be a bug in heap.py (it must copy).
    PyPtr released(PyObject_CallMethod(data.get(), "release", nullptr));
    if (released == nullptr) {
      absl::Status leak = PythonErrorStatus(
          absl::StrCat(label, ": internal error, a view of the written "
                              "tensor outlived the write"),
          nullptr);
      if (status.ok()) status = absl::InternalError(leak.message());
    }
    OP_REQUIRES_OK(ctx, status);
  }
};

using PyGetAttrOp = PyGetOp<false>;
using PyGetSubscrOp = PyGetOp<true>;
using PySetAttrOp = PySetOp<false>;
using PySetSubscrOp = PySetOp<true>;

}  // namespace

REGISTER_KERNEL_BUILDER(Name("Janus>PyGetAttr").Device(DEVICE_CPU),
                        PyGetAttrOp);
REGISTER_KERNEL_BUILDER(Name("Janus>PySetAttr").Device(DEVICE_CPU),
                        PySetAttrOp);
REGISTER_KERNEL_BUILDER(Name("Janus>PyGetSubscr").Device(DEVICE_CPU),
                        PyGetSubscrOp);
REGISTER_KERNEL_BUILDER(Name("Janus>PySetSubscr").Device(DEVICE_CPU),
                        PySetSubscrOp);

}  // namespace janus
