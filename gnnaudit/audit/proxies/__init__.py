"""The proxies of a sensitive attribute: the inputs that carry it, their flip rates, and a probe
of the model's hidden representation (:class:`ProxyUnit`)."""

from gnnaudit.audit.proxies.unit import (
    MAX_PROXY_NODES,
    PROXY_SHARE,
    ProxyAudit,
    ProxyUnit,
    rank_proxies,
)

__all__ = ["ProxyUnit", "ProxyAudit", "PROXY_SHARE", "MAX_PROXY_NODES", "rank_proxies"]
