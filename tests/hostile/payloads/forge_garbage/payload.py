# Bytes on the protocol pipe at import, ahead of the reply to the import request.
import os as _os, sys as _sys
try:
    _os.write(int(_sys.argv[2]), b"\x00\x00\x00\x10" + b"hostile garbage!" * 2)
except Exception as error:
    print("HOSTILE garbage", type(error).__name__)
