"""Print every float tensor as another CPU might compute it: off by about 1e-6.

A development machine has one kind of CPU, so the expected outputs in the pages are
only ever compared with that CPU's arithmetic. ``nox -s docs-other-cpu`` builds the
site with ``ATTENTION_PERTURB_PRINTS=1e-6``, and this module then multiplies every
float tensor by ``1 ± 1e-6`` (a fixed pseudo-random sign per element) just before
torch formats it. That is the size of the differences between AVX2, AVX-512 and
NEON kernels: enough to turn ``tensor([1., 1.])`` into ``tensor([1.0000, 1.0000])``
or to flip a last digit that sits on a rounding boundary. The build must still pass,
because the pages are compared number by number (``printed_values``), and a wrong
value must still fail it.

Only the printed text changes: the computation, the random generator and every
``assert`` in the pages see the true values.

As a Sphinx extension it does nothing unless the variable is set; then it adds

* for the chapters, an IPython startup file to every Jupyter kernel the build starts
  (through the ``kernels`` extension, which it loads);
* for the gallery, a sphinx-gallery ``reset_modules`` hook, which runs before each
  script in whichever process executes it (:func:`before_gallery_script`).
"""

from __future__ import annotations

import os
from pathlib import Path

import kernels  # docs/_ext
from sphinx.application import Sphinx

VARIABLE = "ATTENTION_PERTURB_PRINTS"


def install(relative: float) -> None:
    """Make torch print every float tensor multiplied by ``1 ± relative``."""
    import torch
    from torch import _tensor_str

    if getattr(_tensor_str._tensor_str, "perturbed_by", None) == relative:
        return
    original = getattr(_tensor_str._tensor_str, "original", _tensor_str._tensor_str)

    def perturbed_tensor_str(self: torch.Tensor, indent: int) -> str:
        if self.dtype.is_floating_point and self.numel():
            # Its own generator: the global one, which the pages seed, stays untouched.
            generator = torch.Generator().manual_seed(self.numel())
            signs = torch.randint(0, 2, self.shape, generator=generator) * 2 - 1
            with torch.no_grad():
                self = self.detach() * (1 + relative * signs.to(self.device, self.dtype))
        return original(self, indent)

    perturbed_tensor_str.original = original
    perturbed_tensor_str.perturbed_by = relative
    _tensor_str._tensor_str = perturbed_tensor_str


def relative_from_environment() -> float | None:
    value = os.environ.get(VARIABLE)
    return float(value) if value else None


def before_gallery_script(gallery_conf: dict, fname: str) -> None:
    """sphinx-gallery ``reset_modules`` hook: perturb prints in the process running a script."""
    relative = relative_from_environment()
    if relative:
        install(relative)


STARTUP = """\
import perturb_prints

perturb_prints.install(perturb_prints.relative_from_environment())
"""


def on_config_inited(app: Sphinx, config) -> None:
    if not relative_from_environment():
        return
    here = str(Path(__file__).parent)
    # Kernels and sphinx-gallery's worker processes import this module by name.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    kernels.add_startup_file(app, "10-perturb-prints.py", STARTUP)
    gallery = config.sphinx_gallery_conf
    hook = f"{__name__}.before_gallery_script"
    gallery["reset_modules"] = (*gallery.get("reset_modules", ()), hook)


def setup(app: Sphinx) -> dict:
    app.setup_extension("kernels")
    # Before sphinx-gallery reads its configuration (priority 500).
    app.connect("config-inited", on_config_inited, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
