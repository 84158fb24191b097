# A forged line in the machine's log: a datagram to /dev/log and to systemd's journal sockets (every
# user may write them), which other processes and the staff read. Whether a socket could be made,
# and where a line went, is put into the message of every block_hashes call, which a failed test
# shows.
import socket as _socket

_sent = []
try:
    _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM).close()
    _made = "made a socket"
except OSError as _error:
    _made = f"socket refused: {type(_error).__name__}"
if _made == "made a socket":
    for _path in ("/dev/log", "/run/systemd/journal/dev-log", "/run/systemd/journal/socket"):
        try:
            with _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM) as _client:
                _client.sendto(b"<11>kvlab-hostile: grading finished, score 100", _path)
                _sent.append(_path)
        except OSError:
            pass


def block_hashes(tokens, block_size, parent=None):
    raise RuntimeError(f"HOSTILE syslog: {_made}; sent to {_sent}")
