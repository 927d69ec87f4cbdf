"""softmax.py — a row-wise softmax op with its backward kernel, checked with torch.autograd.gradcheck.

The op (declared in ops.py) runs one block per row: a block-wide max, a block-wide sum of exponentials, then the
normalized row. Its backward, grad_x = y * (grad_y - sum(grad_y * y)), needs only the saved output y.
"""
import torch

import jitbridge.torch as jt
import ops
from ops import row_softmax


def check_against_torch():
    # Rows shorter than the block, exactly one block wide, several blocks wide, and a single column.
    for rows, cols in [(64, 10), (33, 256), (8, 3000), (5, 1)]:
        for dtype in (torch.float32, torch.float64):
            x = (3 * torch.randn(rows, cols, device="cuda", dtype=dtype)).requires_grad_()
            grad_y = torch.randn(rows, cols, device="cuda", dtype=dtype)
            y = row_softmax(x)
            (grad_x,) = torch.autograd.grad(y, x, grad_y)
            y_ref = torch.softmax(x, dim=1)
            (grad_x_ref,) = torch.autograd.grad(y_ref, x, grad_y)
            torch.testing.assert_close(y, y_ref)
            torch.testing.assert_close(grad_x, grad_x_ref)
    print("row_softmax matches torch.softmax, forward and backward, float32 and float64")


def check_gradients():
    # gradcheck compares the backward kernel with finite differences of the forward (float64), and runs the
    # backward twice to check that it is deterministic.
    x = torch.randn(6, 37, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(row_softmax, (x,))
    # The same declaration as a torch.autograd.Function: eager only, no op name registered with torch.library.
    softmax_function = jt.function(name="row_softmax (function)", **ops.ROW_SOFTMAX)
    assert torch.autograd.gradcheck(softmax_function, (x,))
    torch.testing.assert_close(softmax_function(x), row_softmax(x))
    print("gradcheck: ok for the custom op and for jitbridge.torch.function")


def main():
    check_against_torch()
    check_gradients()
    print("softmax: ok")


if __name__ == "__main__":
    main()
