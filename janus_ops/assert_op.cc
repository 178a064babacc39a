// Janus>Assert: the in-graph check of one speculative assumption.
//
// JANUS builds a graph under assumptions about the imperative program (a
// value's type, a branch taken, a loop's trip count...). Each assumption is
// checked in the graph by one Janus>Assert. When the condition is false the op
// fails with FAILED_PRECONDITION and a message carrying the assumption id, which
// the Python runtime parses (janus/graph/ops.py) to fall back to imperative
// execution and invalidate the graph built under that assumption.
//
// Built into janus_ops/_janus_ops.so by setup.py against the installed
// TensorFlow; loaded with tf.load_op_library.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace janus {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Stateful: the op has no outputs, so nothing data-depends on it. Marked
// stateful, it is never pruned, constant-folded or deduplicated, and
// tf.function's automatic control dependencies always run it. Callers that
// must not observe results before the check pass the returned Operation as
// a control input.
// No outputs: the check is a side effect, not a value; an output would
// only invite the graph to be rewired around it.
REGISTER_OP("Janus>Assert")
    .Input("condition: bool")
    .Attr("assumption_id: int")
    .Attr("message: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) -> absl::Status {
      // Rejects a non-scalar condition when the graph is built.
      ShapeHandle unused;
      return c->WithRank(c->input(0), 0, &unused);
    });

class JanusAssertOp : public OpKernel {
 public:
  explicit JanusAssertOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("assumption_id", &assumption_id_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& condition = ctx->input(0);
    // Eager execution skips shape functions, so the rank is checked here too.
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(condition.shape()),
                absl::InvalidArgumentError(absl::StrCat(
                    "Janus>Assert condition must be a scalar, got shape ",
                    condition.shape().DebugString())));
    // The "JANUS_ASSUMPTION_FAILED[id=N]" prefix is parsed by
    // janus.graph.ops.parse_assumption_failure; keep the two in sync.
    OP_REQUIRES(ctx, condition.scalar<bool>()(),
                absl::FailedPreconditionError(
                    absl::StrCat("JANUS_ASSUMPTION_FAILED[id=", assumption_id_,
                                 "]: ", message_)));
  }

 private:
  tensorflow::int64 assumption_id_;
  std::string message_;
};

REGISTER_KERNEL_BUILDER(Name("Janus>Assert").Device(DEVICE_CPU), JanusAssertOp);

// Janus>CheckedIdentity's shape: the input's, its unknown dimensions each a new
// unknown one.
absl::Status CheckedShape(InferenceContext* c) {
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
  // Known dimensions are kept; each unknown one becomes a *new* unknown
  // dimension. Returning the input's own handle would let grappler's
  // shape inference unify it with what consumers demand (unstack(num=3)
  // demands 3 rows), fold the checked condition to true, and so run the
  // consumer on unchecked data.
  ShapeHandle in = c->input(1);
  if (!c->RankKnown(in)) {
    c->set_output(0, c->UnknownShape());
    return absl::OkStatus();
  }
  std::vector<tensorflow::shape_inference::DimensionHandle> dims;
  for (int i = 0; i < c->Rank(in); ++i) {
    auto dim = c->Dim(in, i);
    dims.push_back(c->ValueKnown(dim) ? dim : c->UnknownDim());
  }
  c->set_output(0, c->MakeShape(dims));
  return absl::OkStatus();
}

// Janus>CheckedIdentity: forwards `input` only once `condition` holds, failing
// like Janus>Assert otherwise. For values that must not be used before their
// assumption is checked (the slices of a loop whose trip count is assumed):
// a control dependency on Janus>Assert through an Identity can be optimized
// away by grappler, a data dependency through this op cannot. Stateful for the
// same reasons as Janus>Assert (never pruned, folded or deduplicated).
REGISTER_OP("Janus>CheckedIdentity")
    .Input("condition: bool")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("assumption_id: int")
    .Attr("message: string")
    .SetIsStateful()
    .SetShapeFn(CheckedShape);

class JanusCheckedIdentityOp : public JanusAssertOp {
 public:
  using JanusAssertOp::JanusAssertOp;

  void Compute(OpKernelContext* ctx) override {
    JanusAssertOp::Compute(ctx);
    if (!ctx->status().ok()) return;
    ctx->set_output(0, ctx->input(1));
  }
};

REGISTER_KERNEL_BUILDER(Name("Janus>CheckedIdentity").Device(DEVICE_CPU),
                        JanusCheckedIdentityOp);

}  // namespace janus
