"""agentcore's version, in a leaf that the modules naming it import (the package re-exports
it as ``agentcore.__version__``; they would otherwise import the package, which names every
module)."""

__version__ = "0.1.0"
