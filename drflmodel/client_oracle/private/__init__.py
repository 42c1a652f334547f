"""Private mode (first cut): certify from secure sums only. See :mod:`.math` for which bounds are
functions of sums and what the server learns."""

from .clients import PrivateClient, private_clients
from .cvar import private_cvar_solve
from .fixed_weight import PrivateCertificate, private_fixed_weight_solve
from .secure_sum import SecureSum, SumOnlyChannel, flower_dequantize_sum, flower_quantize

__all__ = ["PrivateClient", "private_clients", "PrivateCertificate", "private_fixed_weight_solve", "private_cvar_solve",
           "SecureSum", "SumOnlyChannel", "flower_quantize", "flower_dequantize_sum"]
