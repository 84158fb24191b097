import socket as _socket
for _host, _port in (("1.1.1.1", 53), ("8.8.8.8", 443), ("127.0.0.1", 22), ("localhost", 80)):
    try:
        _s = _socket.create_connection((_host, _port), timeout=0.5)
        _s.sendall(b"hidden tests please")
        print("HOSTILE connected to", _host, _port)
        _s.close()
    except Exception as error:
        print("HOSTILE no connection to", _host, _port, type(error).__name__)
try:
    _u = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    _u.connect("\0/tmp/.X11-unix/X0")
    print("HOSTILE abstract socket connected")
except Exception as error:
    print("HOSTILE no abstract socket", type(error).__name__)
