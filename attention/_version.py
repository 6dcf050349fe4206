"""The package's version, and the check a downloaded example runs against it.

The distribution is called ``attention-step-by-step`` on PyPI; the import name is
``attention``. (PyPI's ``attention``, "Keras Attention Layer", is an unrelated project
that also installs a top-level module called ``attention``: with both installed, one
overwrites the other.)
"""

from importlib.metadata import PackageNotFoundError, version

#: The name to ``pip install``.
DISTRIBUTION = "attention-step-by-step"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"


def check_version(site_version: str) -> None:
    """Say so, in one line, if this is not the version a page was built with.

    Every notebook and script downloaded from the site calls this first, with the
    version the site was built with. Another version of the package may print other
    numbers than the page shows.

    Parameters
    ----------
    site_version : str
        The version of ``attention-step-by-step`` that the page was built with.

    Examples
    --------
    >>> import attention
    >>> attention.check_version(attention.__version__)  # the same version: silent
    >>> attention.check_version("0.0.1")  # doctest: +ELLIPSIS
    This example was written for attention-step-by-step 0.0.1, but ... is installed: ...
    """
    if __version__ == site_version:
        return
    print(
        f"This example was written for {DISTRIBUTION} {site_version}, but {__version__} is "
        f"installed: printed numbers may differ from the page's. "
        f'pip install "{DISTRIBUTION}[plot]=={site_version}" installs the same version.'
    )
