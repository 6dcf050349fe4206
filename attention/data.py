"""The running examples: two six-token sentences with made-up 3-D embeddings.

Every page of the documentation uses ``INPUTS``, so numbers can be compared from one
chapter to the next. The embeddings are small, hand-picked values chosen for
illustration (real models learn hundreds or thousands of dimensions per token).

These are ordinary tensors: don't modify them in place (``INPUTS.mul_(2)``), or every
later example in the same Python session will see the changed values. Use
``INPUTS.clone()`` when you want to experiment.

>>> from attention import INPUTS, TOKENS
>>> INPUTS.shape
torch.Size([6, 3])
>>> TOKENS[1], INPUTS[1]
('journey', tensor([0.5500, 0.8700, 0.6600]))
"""

import torch

#: The running example sentence, one token per word.
SENTENCE = "Your journey starts with one step"

#: The six tokens of :data:`SENTENCE`, in order.
TOKENS = ("Your", "journey", "starts", "with", "one", "step")

#: 3-D embeddings of :data:`TOKENS`, shape ``(6, 3)``: row ``i`` embeds ``TOKENS[i]``.
INPUTS = torch.tensor(
    [
        [0.43, 0.15, 0.89],  # Your     (x^1)
        [0.55, 0.87, 0.66],  # journey  (x^2)
        [0.57, 0.85, 0.64],  # starts   (x^3)
        [0.22, 0.58, 0.33],  # with     (x^4)
        [0.77, 0.25, 0.10],  # one      (x^5)
        [0.05, 0.80, 0.55],  # step     (x^6)
    ]
)

#: A second sentence, for trying the same steps on other numbers.
SWITCH_SENTENCE = "I can't find the light switch"

#: The six tokens of :data:`SWITCH_SENTENCE`, in order.
SWITCH_TOKENS = ("I", "can't", "find", "the", "light", "switch")

#: 3-D embeddings of :data:`SWITCH_TOKENS`, shape ``(6, 3)``.
SWITCH_INPUTS = torch.tensor(
    [
        [0.21, 0.47, 0.91],  # I
        [0.52, 0.11, 0.65],  # can't
        [0.03, 0.85, 0.19],  # find
        [0.73, 0.64, 0.39],  # the
        [0.13, 0.55, 0.68],  # light
        [0.22, 0.77, 0.08],  # switch
    ]
)
