"""
A sliding window's reach grows with depth
=========================================

With a sliding window, a token attends only to the last few tokens. Stacked layers
pass information along, so after several layers a token can draw on tokens far
outside its window.
"""

# %%
# ``sliding_window_mask(12, 3)``: each token sees itself and the two before it.
# Multiplying the mask by itself, with booleans, gives which tokens can reach which
# through two layers, three, and so on.

import matplotlib.pyplot as plt
import torch

from attention import MODELS, sliding_window_mask
from attention.figures import head_grid

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

window = sliding_window_mask(12, 3).float()
reach, fields = torch.eye(12), []
for layers in range(1, 5):
    reach = (window @ reach).clamp(max=1)
    fields.append(reach.clone())
    print(f"{layers} layer(s): the last token draws on {int(reach[-1].sum())} tokens")
# Expected output:
# 1 layer(s): the last token draws on 3 tokens
# 2 layer(s): the last token draws on 5 tokens
# 3 layer(s): the last token draws on 7 tokens
# 4 layer(s): the last token draws on 9 tokens

# %%
# Each layer widens the band by ``window - 1`` positions: after ``layers`` layers the
# last token reaches ``layers * (window - 1)`` positions back, and draws on one token
# more, itself (4 layers with a window of 3 above: 8 positions back, 9 tokens).

fields = torch.stack(fields)
head_grid(
    fields,
    allowed=fields != 0,
    annotate=False,
    ncols=4,
    titles=[f"{n} layer{'s' if n > 1 else ''}" for n in range(1, 5)],
    suptitle="Which tokens (columns) can reach each token (rows), window of 3",
)
plt.show()

# %%
# Mistral 7B slides a window over every one of its layers. Its ``receptive_field``
# in ``attention.MODELS`` is ``layers * (sliding_window - 1)``, the positions back the
# last layer can reach; counting the token itself, one more token.

mistral = MODELS["Mistral 7B"]
field = mistral.receptive_field
print(
    f"Mistral 7B: {mistral.layers} layers x (window {mistral.local.window} - 1) "
    f"= {field:,} positions back"
)
# Expected output:
# Mistral 7B: 32 layers x (window 4096 - 1) = 131,040 positions back
print(f"counting the token itself: {field + 1:,} tokens")
# Expected output:
# counting the token itself: 131,041 tokens
