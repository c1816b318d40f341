"""FLOP formulas for the matmul-class operators torch's own registry leaves out, and the rule
that names an operator as matmul-class when it ran with no formula at all.

`torch.utils.flop_counter` knows mm, addmm, bmm, baddbmm, convolutions and the CUDA attention
kernels. A training step also runs grouped matmuls (`aten._grouped_mm`: the experts of a
mixture-of-experts layer in Hugging Face Transformers 5 and TorchTitan), matrix-vector and
vector products (`mv`, `dot`: a matmul of a 1-D operand), recurrent layers fused into one
kernel (`mkldnn_rnn_layer` is nn.LSTM on the CPU, `_cudnn_rnn` on NVIDIA), the CPU and the
"overrideable" scaled-dot-product attention, and quantized matmuls. Without a formula their
FLOPs are silently missing from the count (a Mixtral's experts: counted/formula 0.37).

Every formula takes shapes (torch's `shape_wrapper` turns each tensor argument into its shape
before calling) and counts a multiply-add as 2 FLOPs, as torch's do. They run inside the
user's step, so the caller catches anything they raise (promise 1). Standard library only.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


def _prod(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """`_grouped_mm(a, b, offs)`: each row of `a` meets one group's matrix. 2-D x 3-D
    (tokens x experts' weights: the forward and the input's gradient) and 3-D x 2-D: 2 x out x
    K. 2-D x 2-D (the weights' gradient, the contraction split by `offs` into the out's groups):
    2 x M x K x N, whatever the groups. 3-D x 3-D: a batched matmul. Rows past the last offset
    are counted too (the shapes do not say how many are used; reading `offs` would wait on the
    device)."""
    if len(a) == 2 and len(b) == 2:
        return 2 * int(a[0]) * int(a[1]) * int(b[1])
    return 2 * _prod(out_shape) * int(a[-1])


def scaled_grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    return grouped_mm(a, b, out_shape=out_shape)


def mv(a: Any, x: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """(M, N) @ (N,): 2 x M x N."""
    return 2 * int(a[0]) * int(a[1])


def addmv(bias: Any, a: Any, x: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    return mv(a, x)


def dot(a: Any, b: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """(N,) . (N,): 2 x N."""
    return 2 * int(a[0])


def addbmm(bias: Any, a: Any, b: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """Σ_b a[b] @ b[b]: a bmm of (B, M, K) x (B, K, N)."""
    return 2 * int(a[0]) * int(a[1]) * int(a[2]) * int(b[2])


def matmul_out(a: Any, b: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """A matmul whose second operand is packed or quantized (`_int_mm`, `_weight_int8pack_mm`,
    `_weight_int4pack_mm`): 2 x out x K, K the first operand's last dimension."""
    return 2 * _prod(out_shape) * int(a[-1])


def addmm_activation(
    bias: Any, a: Any, b: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    """addmm fused with its activation (GELU or ReLU): the addmm's 2 x M x K x N."""
    return 2 * int(a[0]) * int(a[1]) * int(b[1])


def _rnn_rows(input_shape: Any) -> int:
    """Time steps x batch: every element of the input but its feature dimension (a packed
    sequence is (Σ lengths, features))."""
    return _prod(input_shape[:-1])


def mkldnn_rnn_layer(
    input: Any, w_ih: Any, w_hh: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    """One layer and direction of nn.LSTM/GRU/RNN on the CPU (oneDNN): each time step
    multiplies the input by W_ih (G·H x I) and the hidden state by W_hh (G·H x H)."""
    return 2 * _rnn_rows(input) * (_prod(w_ih) + _prod(w_hh))


def mkldnn_rnn_layer_backward(
    input: Any, w_ih: Any, w_hh: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    """The gradients of the input and hidden state, and of both weights: twice the forward."""
    return 2 * mkldnn_rnn_layer(input, w_ih, w_hh)


def fused_rnn(input: Any, weights: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """`_cudnn_rnn` and `miopen_rnn`: every layer and direction in one kernel; `weights` is the
    flat list of each layer's W_ih, W_hh (and biases, 1-D: no matmul). Layers above the first
    take the layer below's output, with as many rows as the input."""
    rows = _rnn_rows(input)
    return 2 * rows * sum(_prod(w) for w in weights if len(w) == 2)


#: aten name -> formula (shapes in, FLOPs out); those a torch build lacks are skipped
ATEN: dict[str, Callable[..., int]] = {
    "_grouped_mm": grouped_mm,
    "_scaled_grouped_mm": scaled_grouped_mm,
    "mv": mv,
    "addmv": addmv,
    "dot": dot,
    "vdot": dot,
    "addbmm": addbmm,
    "_int_mm": matmul_out,
    "_weight_int8pack_mm": matmul_out,
    "_weight_int4pack_mm": matmul_out,
    "_addmm_activation": addmm_activation,
    "mkldnn_rnn_layer": mkldnn_rnn_layer,
    "mkldnn_rnn_layer_backward": mkldnn_rnn_layer_backward,
    "_cudnn_rnn": fused_rnn,
    "miopen_rnn": fused_rnn,
}
#: attention ops without a formula in torch, counted as its CUDA kernels are (sdpa formulas)
ATTENTION = (
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_attention_math_for_mps",
)
ATTENTION_BACKWARD = (
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_fused_attention_overrideable_backward",
)
#: other libraries' custom ops with a grouped-matmul meaning: namespace, op, formula
CUSTOM: tuple[tuple[str, str, Callable[..., int]], ...] = (
    # Hugging Face Transformers' grouped_mm fallback (a Python loop over experts, one op)
    ("transformers", "grouped_mm_fallback", grouped_mm),
)


def grouped_mm_fallback_backward(
    input: Any, weight: Any, offs: Any, grad_output: Any, *args: Any, **kw: Any
) -> int:
    """The fallback's backward: the input's and the weights' gradients, twice the forward."""
    return 2 * 2 * _prod(input) * int(weight[-1])


CUSTOM_BACKWARD = (("transformers", "grouped_mm_fallback_backward", grouped_mm_fallback_backward),)

#: communication namespaces: their collectives move data, they do no matmul-class work
_NOT_COMPUTE = frozenset({"c10d", "_c10d_functional", "c10d_functional", "_dtensor"})
_MATMUL_LIKE = re.compile(
    r"(?:^|_)(?:[a-z]*mm|matmul|gemm[a-z0-9]*|conv[a-z0-9]*|[a-z]*attention[a-z]*|[a-z]*attn"
    r"[a-z]*|[a-z]*rnn[a-z]*|lstm[a-z]*|gru[a-z]*|linear|einsum|dot|vdot|mv|addmv|addr|sdpa)"
    r"(?:$|_|\d)"
)
_NOT_MATMUL = re.compile(r"upsample|grid_sampler|interpolate")


def matmul_class(qualified: str) -> bool:
    """Whether an operator named `namespace.name` does matmul-class work (a matmul, a
    convolution, attention, a fused recurrent layer): the ones that should have a formula."""
    namespace, _, name = qualified.partition(".")
    if namespace in _NOT_COMPUTE or _NOT_MATMUL.search(name):
        return False
    return bool(_MATMUL_LIKE.search(name.lower()))
