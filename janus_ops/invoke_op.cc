// Janus>Invoke: runs a function of the graph's library by name, from inside
// any graph, that function's own body included (a recursive call, the JANUS
// paper's InvokeOp, section 4.2.1).
//
// Why an op of our own: TF's call ops cannot recurse. A PartitionedCall that
// names its own function crashes on the first run, and lowering or inlining a
// direct call node keeps expanding it (../shared/notes/recursion-tf2.21.md).
// This op is opaque to those passes: it is neither inlined nor analysed, and
// the function library runtime instantiates the callee lazily, on the op's
// first run, so a function can call itself to any depth the data asks for.
//
// The callee is instantiated for TF's default executor: instantiated for the
// eager runtime's single-threaded one, every level of a recursion would hold
// one of the inter-op threads while it waits, and a deep tree deadlocks.
//
// Gradient: decided in Python (janus/graph/ops.py): the function named by
// the ``grad_f`` attribute, run through another Janus>Invoke, gives the
// gradients (of dtypes ``grad_types``) of the inputs ``grad_inputs``; an op
// without one has no gradient (an error names it, never a silent zero).
//
// Built into janus_ops/_janus_ops.so by setup.py; loaded by janus/graph/ops.py.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace janus {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::AttrSlice;
using ::tensorflow::DataTypeVector;
using ::tensorflow::DEVICE_CPU;
using ::tensorflow::FunctionLibraryRuntime;
using ::tensorflow::NameAttrList;
using ::tensorflow::OpInputList;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Tensor;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Stateful: the callee may read and write variables, and two calls with the
// same inputs are two calls (never deduplicated or constant-folded).
REGISTER_OP("Janus>Invoke")
    .Input("args: Tin")
    .Output("output: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("f: func")
    .Attr("grad_f: func")
    .Attr("grad_inputs: list(int) = []")
    .Attr("grad_types: list(type) >= 0 = []")
    .Attr("output_shapes: list(shape) = []")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) -> absl::Status {
      // The callee's result shapes as its trace found them (a function that calls
      // itself cannot be shape-inferred through the call); unknown if not given.
      std::vector<PartialTensorShape> shapes;
      TF_RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
      if (!shapes.empty() && static_cast<int>(shapes.size()) != c->num_outputs()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Janus>Invoke: ", shapes.size(), " output_shapes for ", c->num_outputs(),
            " outputs"));
      }
      for (int i = 0; i < c->num_outputs(); ++i) {
        if (shapes.empty()) {
          c->set_output(i, c->UnknownShape());
          continue;
        }
        ShapeHandle shape;
        TF_RETURN_IF_ERROR(c->MakeShapeFromPartialTensorShape(shapes[i], &shape));
        c->set_output(i, shape);
      }
      return absl::OkStatus();
    });

class JanusInvokeOp : public AsyncOpKernel {
 public:
  explicit JanusInvokeOp(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("f", &function_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("Tout", &output_types_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    FunctionLibraryRuntime* library = ctx->function_library();
    OP_REQUIRES_ASYNC(ctx, library != nullptr,
                      absl::InternalError("Janus>Invoke: no function library"), done);
    FunctionLibraryRuntime::Handle handle;
    OP_REQUIRES_OK_ASYNC(ctx, Instantiated(library, &handle), done);

    OpInputList inputs;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->input_list("args", &inputs), done);
    std::vector<Tensor> args(inputs.begin(), inputs.end());
    auto* results = new std::vector<Tensor>;

    FunctionLibraryRuntime::Options options(ctx->step_id());
    options.rendezvous = ctx->rendezvous();
    options.cancellation_manager = ctx->cancellation_manager();
    options.collective_executor = ctx->collective_executor();
    options.step_container = ctx->step_container();
    options.runner = ctx->runner();
    library->Run(options, handle, args, results,
                 [this, ctx, done = std::move(done), results](const absl::Status& status) {
                   std::unique_ptr<std::vector<Tensor>> owned(results);
                   if (!status.ok()) {
                     ctx->SetStatus(status);
                   } else if (owned->size() != output_types_.size()) {
                     ctx->SetStatus(absl::InternalError(absl::StrCat(
                         "Janus>Invoke: ", function_.name(), " returned ", owned->size(),
                         " values, expected ", output_types_.size())));
                   } else {
                     for (size_t i = 0; i < owned->size(); ++i) {
                       if ((*owned)[i].dtype() != output_types_[i]) {
                         ctx->SetStatus(absl::InternalError(absl::StrCat(
                             "Janus>Invoke: ", function_.name(), " output ", i,
                             " has the wrong dtype")));
                         break;
                       }
                       ctx->set_output(static_cast<int>(i), (*owned)[i]);
                     }
                   }
                   done();
                 });
  }

 private:
  // One instantiation per function library runtime (a process has one per
  // device; a recursion's levels all share it).
  absl::Status Instantiated(FunctionLibraryRuntime* library,
                            FunctionLibraryRuntime::Handle* handle) {
    absl::MutexLock lock(&mu_);
    auto found = handles_.find(library);
    if (found != handles_.end()) {
      *handle = found->second;
      return absl::OkStatus();
    }
    FunctionLibraryRuntime::InstantiateOptions options;
    options.executor_type = "DEFAULT";
    TF_RETURN_IF_ERROR(library->Instantiate(function_.name(), AttrSlice(&function_.attr()),
                                            options, handle));
    handles_.emplace(library, *handle);
    return absl::OkStatus();
  }

  NameAttrList function_;
  DataTypeVector output_types_;
  absl::Mutex mu_;
  absl::flat_hash_map<FunctionLibraryRuntime*, FunctionLibraryRuntime::Handle> handles_
      ABSL_GUARDED_BY(mu_);
};

REGISTER_KERNEL_BUILDER(Name("Janus>Invoke").Device(DEVICE_CPU), JanusInvokeOp);

}  // namespace janus
