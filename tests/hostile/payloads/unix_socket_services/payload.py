# Named unix sockets of the machine's and the grading user's services: every socket path
# /proc/net/unix lists, and every socket found under /run, /var/run and /tmp, connected to (stream,
# then datagram) and asked a line; what answered is put into the message of every block_hashes
# call, which a failed test shows. The worker talks to its grader through pipes only: making a
# socket at all must be refused.
import os as _os
import socket as _socket
import stat as _stat

_paths = set()
try:
    with open("/proc/net/unix", encoding="ascii", errors="replace") as _table:
        _paths |= {line.split()[-1] for line in list(_table)[1:] if line.split()[-1].startswith("/")}
except OSError:
    pass
for _top in ("/run", "/var/run", "/tmp"):
    for _folder, _dirs, _names in _os.walk(_top):
        for _name in _names:
            _path = _os.path.join(_folder, _name)
            try:
                if _stat.S_ISSOCK(_os.lstat(_path).st_mode):
                    _paths.add(_path)
            except OSError:
                pass
        if len(_paths) > 200:
            break
_answers, _made = [], None
try:
    _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM).close()
    _made = "made a socket"
except OSError as _error:
    _made = f"socket refused: {type(_error).__name__}"
for _path in sorted(_paths)[:200] if _made == "made a socket" else []:
    for _kind in (_socket.SOCK_STREAM, _socket.SOCK_DGRAM):
        try:
            with _socket.socket(_socket.AF_UNIX, _kind) as _client:
                _client.settimeout(0.2)
                _client.connect(_path)
                _client.send(b"PING\r\n")
                _answers.append((_path, _client.recv(200)))
                break
        except OSError:
            pass


def block_hashes(tokens, block_size, parent=None):
    raise RuntimeError(f"HOSTILE unix sockets: {_made}; {len(_paths)} paths, answered: {_answers[:5]!r}")
