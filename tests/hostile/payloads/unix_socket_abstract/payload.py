# Abstract unix sockets of other processes (no file, so no permission bits): every "@name" that
# /proc/net/unix lists is connected to and asked a line, and the worker binds one of its own for a
# later process to find. Whether a socket could be made and what answered is put into the message
# of every block_hashes call, which a failed test shows.
import socket as _socket

try:
    with open("/proc/net/unix", encoding="ascii", errors="replace") as _table:
        _names = sorted({line.split()[-1] for line in list(_table)[1:] if line.split()[-1].startswith("@")})
except OSError:
    _names = []
_answers, _kept = [], []
try:
    _own = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    _own.bind(b"\0kvlab-hostile-left-abstract")
    _own.listen(1)
    _kept.append(_own)
    _made = "made a socket"
except OSError as _error:
    _made = f"socket refused: {type(_error).__name__}"
for _name in _names[:100] if _made == "made a socket" else []:
    try:
        with _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM) as _client:
            _client.settimeout(0.2)
            _client.connect(b"\0" + _name[1:].encode())
            _client.send(b"PING\r\n")
            _answers.append((_name, _client.recv(200)))
    except OSError:
        pass


def block_hashes(tokens, block_size, parent=None):
    raise RuntimeError(f"HOSTILE abstract sockets: {_made}; {len(_names)} names, answered: {_answers[:5]!r}")
