"""Errors a broker adapter or local deployment raises; each message is one line for the user."""


class BrokerError(Exception):
    """Base: the message names the host or component and says what to do."""


class BrokerUnavailable(BrokerError):
    """The system cannot run here (e.g. a binary is missing); says what to install."""


class BrokerStartError(BrokerError):
    """A local node did not come up; names the node and its log file."""


class BrokerConnectionError(BrokerError):
    """A broker could not be reached or stopped answering; names the host."""
