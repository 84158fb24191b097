# Files left in the machine's scratch folders that every user may write (/tmp, /var/tmp, /dev/shm),
# for the next submission graded on the same machine to find (or to be run by it). The test looks
# for them by name after the grading: none may remain.
import os as _os

_NAME = "kvlab-hostile-persist-" + _os.path.basename(_os.path.dirname("@MARKER@"))
for _folder in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(_os.path.join(_folder, _NAME), "w") as _file:
            _file.write("import os; open(%r + '/scratch-ran', 'w').close()\n" % "@MARKER@")
    except OSError:
        pass
