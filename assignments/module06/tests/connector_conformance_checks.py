"""Generated call sequences over module 6's KVConnector and its store, each call checked against its rule.

`connector_machine` builds a connector on a `RecordingStore` (a kvlab.kvstore.MemoryStore in the
test's process that keeps every command it receives, with its keys and reply; the connector gets a
kvlab.testing.store_loan.StoreClient of it, as in the other tests) with chunks of 1 to 4 tokens or
the default chunk_size, after now and then a constructor call the contract refuses. Then, in any
order: lookup, load and store of prompts that share prefixes (as lists or int32 arrays), with n
drawn over the whole stated domain (every valid value, 0, negatives, past the full chunks, True,
False, floats, None, numpy integers) and KV of several dtypes and head counts, some of the wrong
shape; and, between calls, what another engine or the store itself may do: a chunk evicted, a
chunk damaged, a chunk replaced by one of another length. The model is what the store should hold
(which chunk under which prefix, or a chunk load must refuse); from it every call's answer is
exact: its return value or ValueError, the five counters, the keys in the store afterwards, and
which commands the call sent with which keys.

Freedoms the contract leaves, compared up to them:
- the key text: the keys are the student's own `chunk_keys` (whole-key or digest chaining; its
  properties are tested apart), so the model is kept by prefix and asks chunk_keys for the key;
- the byte layout of a stored chunk: a value is read back only by the student's load, and
  bytes_loaded / bytes_stored are compared with the len() of the values the store returned / got;
- how commands are grouped: one by one or pipelined (lookup may stop at the first miss, load at the
  first chunk that fails), so what is compared is which commands and keys, never round trips;
- a numpy integer n: a Python int is what the contract names; taking it as its value or refusing it
  (ValueError, no command) are both accepted.

One module (over 400 lines): the rule table, the recording store, the machine and the fixed check of
the three rules it finds on some draws only share the store, the prompts and the KV they build.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from kvlab.kvstore import MemoryStore
from kvlab.testing.conformance import Rule, Transcript, machine_settings, outcome_of, raised, short
from kvlab.testing.store_loan import lend

CONNECTOR = "kv_connector.py:KVConnector"
FINGERPRINT = "conformance-model/s0/L2x2xTxHx2"
COUNTERS = ("hits", "misses", "bytes_loaded", "bytes_stored", "chunks_stored")

# Each rule's sentence, quoted exactly from the stub (tests/suites/test_conformance.py checks it is there).
CONNECTOR_RULES: dict[str, Rule] = {
    "connector_init": Rule(CONNECTOR, "KVConnector(store, fingerprint, chunk_size=256): `store` as described at the "
                                      "top of this file; `fingerprint` a non-empty str naming the model "
                                      "(kvlab.kvstore.model_fingerprint); chunk_size an int >= 1, not a bool "
                                      "(ValueError otherwise)."),
    "connector_keys": Rule(CONNECTOR, "Chunk i of a prompt is stored under chunk_keys(tokens, chunk_size, "
                                      "fingerprint)[i] as serialize_chunk(its KV, fingerprint)."),
    "connector_counters": Rule(CONNECTOR, "Counters (ints, 0 when new, only ever increased):"),
    "lookup": Rule(f"{CONNECTOR}.lookup", "How many leading tokens of `tokens` can be loaded: chunk_size x the "
                                          "number of leading full chunks whose keys are all in the store, "
                                          "consecutively from chunk 0 (a missing chunk ends the run, whatever follows "
                                          "it)."),
    "lookup_exists": Rule(f"{CONNECTOR}.lookup", "Reads no values: only `exists`, one key per EXISTS (a single EXISTS "
                                                 "of many keys says how many exist, not which),"),
    "misses": Rule(f"{CONNECTOR}.lookup", "Adds the full chunks outside the run to `misses`."),
    "load_n": Rule(f"{CONNECTOR}.load", "n: an int (not a bool: True is refused), 1 <= n <= len(tokens) // "
                                        "chunk_size * chunk_size (ValueError otherwise, raised before the store is "
                                        "read: no command reaches it);"),
    "load": Rule(f"{CONNECTOR}.load", "Loads the ceil(n / chunk_size) chunks that cover tokens 0 .. n-1, concatenates "
                                      "them along axis 2 in the dtype they were stored in, and returns the first n "
                                      "positions."),
    "load_none": Rule(f"{CONNECTOR}.load", "Returns None, loading nothing, when any of those chunks is missing "
                                           "(evicted since `lookup`), fails deserialize_chunk, or is not [L, 2, "
                                           "chunk_size, Hkv, d] with the same L, Hkv, d and dtype as the first:"),
    "load_reads": Rule(f"{CONNECTOR}.load", "Reads only those chunks, each at most once:"),
    "load_counters": Rule(f"{CONNECTOR}.load", "Adds the number of chunks read to `hits` on success only; adds the "
                                               "bytes received (len() of every value the store returned) to "
                                               "`bytes_loaded` in both cases, success or None."),
    "store": Rule(f"{CONNECTOR}.store", "Store every full chunk of `tokens` whose key is not in the store yet; return "
                                        "how many it stored."),
    "store_exists": Rule(f"{CONNECTOR}.store", "A chunk already in the store (`exists`) is not sent again."),
    "store_errors": Rule(f"{CONNECTOR}.store", "ValueError for another number of dimensions, an axis 1 other than 2, "
                                               "or a T too short, raised before any value is sent: nothing is stored "
                                               "and no counter changes."),
    "store_counters": Rule(f"{CONNECTOR}.store", "Adds to `chunks_stored` and `bytes_stored`."),
}

# Sized to the grading's time (each step is a round trip or two, and the connector's commands each
# another); the rules found on some draws only are checked on every grading by stated_edges_problem.
CONNECTOR_PUBLIC, CONNECTOR_HIDDEN = machine_settings(max_examples=6, steps=10), machine_settings(max_examples=10, steps=12)
# A chunk the store holds that load must refuse (damaged, or of another length): lookup still counts it.
REFUSED = "refused"
# Constructor arguments the contract refuses: (chunk_size, fingerprint) as passed, for ValueError.
BAD_INIT = ((0, FINGERPRINT), (-2, FINGERPRINT), (True, FINGERPRINT), (2.0, FINGERPRINT), ("4", FINGERPRINT),
            (None, FINGERPRINT), (3, ""), (3, None))
BASE = [int(t) for t in np.random.default_rng(606).integers(0, 30_000, size=5 * 256 + 255)]


class RecordingStore(MemoryStore):
    """A MemoryStore that keeps what it receives: `sent`, one list of (command, encoded args, reply) per request."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[list[tuple[str, tuple[bytes, ...], Any]]] = []

    def _run(self, batch: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        replies = super()._run(batch)
        self.sent.append([(name, tuple(args), reply) for (name, args), reply in zip(batch, replies)])
        return replies

    def commands_since(self, start: int) -> list[tuple[str, tuple[bytes, ...], Any]]:
        """Every command received since request `start`, in order."""
        return [command for request in self.sent[start:] for command in request]

    def held(self) -> dict[bytes, bytes]:
        """What the store holds now, read without a command."""
        with self._lock:
            return dict(self._data)


def n_choices(limit: int, chunk: int) -> list[Any]:
    """The n values a load may be given: valid ones, then the stated ValueErrors and the numpy freedom."""
    valid = sorted({1, limit, limit - 1, chunk, chunk + 1, limit // 2} & set(range(1, limit + 1)))
    return [*valid, 0, -1, -chunk, limit + 1, True, False, 1.0, float(max(limit, 1)), None, np.int64(max(limit, 1))]


def is_valid_n(n: Any, limit: int) -> bool:
    return type(n) is int and 1 <= n <= limit


def prompt_strategy(chunk: int) -> st.SearchStrategy[tuple[int, int, int | None]]:
    """(full chunks, trailing tokens, chunk whose last token is changed or None): a prompt drawn from BASE."""
    rests = sorted({0, 1, chunk - 1} & set(range(chunk)))
    return st.tuples(st.integers(0, 5), st.sampled_from(rests), st.sampled_from([None, None, None, 0, 1, 2]))


def kv_of(tokens: Sequence[int], length: int, dtype: str, heads: int, salt: int) -> np.ndarray:
    """KV [L=2, 2, length, heads, d=2] of tokens (exact in float16): a function of each token and `salt`."""
    values = np.zeros((2, 2, length, heads, 2))
    shown = np.asarray([t % 61 for t in tokens[:length]] + [0] * max(0, length - len(tokens)), dtype=float)
    values += shown[None, None, :, None, None] + salt
    values += np.arange(2)[:, None, None, None, None] * 0.25 + np.arange(2)[None, :, None, None, None] * 0.5
    values += np.arange(2)[None, None, None, None, :] * 0.125
    return values.astype(dtype)


def connector_machine(student: Any) -> type[RuleBasedStateMachine]:
    """KVConnector calls with answers, counters, the store's keys and the commands sent checked after each
    (see the module docstring)."""
    module = student.kv_connector

    class ConnectorMachine(RuleBasedStateMachine):
        @initialize(chunk=st.sampled_from([None, 1, 2, 3, 4, 4]), bad=st.sampled_from([None, None, *BAD_INIT]))
        def start(self, chunk: int | None, bad: tuple[Any, Any] | None) -> None:
            self.store = RecordingStore()
            client = student.call("kvlab.testing.store_loan:StoreClient", lend(self.store))
            self.log = Transcript("store = a MemoryStore (empty)")
            if bad is not None:
                call = f"KVConnector(store, {bad[1]!r}, {bad[0]!r})"
                got = outcome_of(lambda: module.KVConnector(client, bad[1], bad[0]))
                self.log.add(call, got)
                self.log.check(raised(got, ValueError), call, f"it {got.describe()}; the rule gives ValueError",
                               CONNECTOR_RULES["connector_init"])
            self.chunk = 256 if chunk is None else chunk
            call = f"connector = KVConnector(store, {FINGERPRINT!r}" + (
                ")  # chunk_size: the default, 256 tokens" if chunk is None else f", {chunk})")
            got = outcome_of(lambda: module.KVConnector(client, FINGERPRINT) if chunk is None
                             else module.KVConnector(client, FINGERPRINT, chunk))
            self.log.add(call, got)
            self.log.check(got.error is None, call, f"it {got.describe()}", CONNECTOR_RULES["connector_init"])
            self.connector = got.value
            self.present: dict[tuple[int, ...], Any] = {}  # prefix of a stored chunk -> its KV, or REFUSED
            self.keys: dict[tuple[int, ...], list[str]] = {}  # prompt -> chunk_keys of it
            self.counts = dict.fromkeys(COUNTERS, 0)
            self.salt = 0

        # --- the prompts and their keys ---

        def prompt(self, drawn: tuple[int, int, int | None]) -> list[int]:
            chunks, rest, changed = drawn
            tokens = list(BASE[:chunks * self.chunk + rest % self.chunk])
            if changed is not None and changed < chunks:
                tokens[(changed + 1) * self.chunk - 1] += 1
            return tokens

        def keys_of(self, tokens: list[int]) -> list[str]:
            """chunk_keys(tokens, chunk_size, FINGERPRINT), the student's, asked once per prompt."""
            if tuple(tokens) not in self.keys:
                call = f"chunk_keys(<{len(tokens)} tokens>, {self.chunk}, {FINGERPRINT!r})"
                got = outcome_of(functools.partial(module.chunk_keys, tokens, self.chunk, FINGERPRINT))
                self.log.check(got.error is None and isinstance(got.value, list)
                               and len(got.value) == len(tokens) // self.chunk, call,
                               f"it {got.describe()}", CONNECTOR_RULES["connector_keys"])
                keys = list(got.value)
                for i in range(len(keys)):  # each chunk's prefix is a prompt whose last key is that chunk's
                    self.keys.setdefault(tuple(tokens[:(i + 1) * self.chunk]), keys[:i + 1])
                self.keys[tuple(tokens)] = keys
            return self.keys[tuple(tokens)]

        def prefixes(self, tokens: list[int]) -> list[tuple[int, ...]]:
            """The prefix each full chunk's key names."""
            return [tuple(tokens[:(i + 1) * self.chunk]) for i in range(len(tokens) // self.chunk)]

        def key_of(self, prefix: tuple[int, ...]) -> bytes:
            return self.keys_of(list(prefix))[-1].encode()

        # --- what a call sent, and the state afterwards ---

        def sent(self, start: int, call: str, allowed: set[str], keys: list[bytes], rule: Rule
                 ) -> list[tuple[str, tuple[bytes, ...], Any]]:
            """The commands since request `start`, checked: only `allowed` names, only `keys`."""
            commands = self.store.commands_since(start)
            for name, args, _ in commands:
                touched = args if name != "set" else args[:1]
                stray = [key.decode(errors="replace") for key in touched if key not in keys]
                self.log.check(name not in allowed or not stray, call,
                               f"it sent {name.upper()} of a key that is not one of chunk_keys(tokens, {self.chunk}, "
                               f"{FINGERPRINT!r}) for its chunks of chunk_size {self.chunk}: {short(stray[:1], 90)}",
                               CONNECTOR_RULES["connector_keys"])
                self.log.check(name in allowed, call,
                               f"it sent {name.upper()} "
                               f"{', '.join(short(key.decode(errors='replace'), 50) for key in touched)}"
                               f"; the rule allows {', '.join(sorted(a.upper() for a in allowed)) or 'no command'}"
                               + (f" of the keys of {len(keys)} chunks of this call" if allowed else ""), rule)
            return commands

        def check_after(self, call: str, rule: Rule) -> None:
            """The five counters and the keys the store holds, against the model."""
            asked = [(self.connector, name, None) for name in COUNTERS]
            got = outcome_of(lambda: student.call("kvlab.testing.probe:ask", asked))
            self.log.check(got.error is None, call, f"afterwards reading the counters {got.describe()}",
                           CONNECTOR_RULES["connector_counters"])
            now = dict(zip(COUNTERS, got.value))
            wrong = [f"{name} is {now[name]!r}, the rule gives {self.counts[name]}" for name in COUNTERS
                     if type(now[name]) is not int or now[name] != self.counts[name]]
            self.log.check(not wrong, call, f"afterwards connector.{'; '.join(wrong)}", rule)
            held = set(self.store.held())
            want = {self.key_of(prefix) for prefix in self.present}
            self.log.check(held == want, call, f"afterwards the store holds {len(held)} keys; the rule gives "
                           f"{len(want)} ({len(held - want)} keys no chunk of these calls names, {len(want - held)} "
                           "chunks missing)", rule)

        # --- the calls ---

        @rule(drawn=prompt_strategy(256), as_array=st.booleans())
        def lookup(self, drawn: tuple[int, int, int | None], as_array: bool) -> None:
            tokens = self.prompt(drawn)
            keys = [key.encode() for key in self.keys_of(tokens)]
            sent = np.asarray(tokens, dtype=np.int32) if as_array else tokens
            call = f"connector.lookup(<{len(tokens)} tokens{' as an int32 array' if as_array else ''}>)"
            start = len(self.store.sent)
            got = outcome_of(functools.partial(self.connector.lookup, sent))
            self.log.add(call, got)
            run = 0
            for prefix in self.prefixes(tokens):
                if prefix not in self.present:
                    break
                run += 1
            self.log.check(got.error is None and got.value == run * self.chunk, call,
                           f"it {got.describe()}; {run} leading chunks of {self.chunk} are in the store: the rule "
                           f"gives {run * self.chunk}", CONNECTOR_RULES["lookup"])
            commands = self.sent(start, call, {"exists"}, keys, CONNECTOR_RULES["lookup_exists"])
            asked = [args for _, args, _ in commands]
            self.log.check(all(len(args) == 1 for args in asked) and len(set(asked)) == len(asked), call,
                           f"it sent EXISTS of {[len(args) for args in asked]} keys: the rule gives one key per "
                           "EXISTS, each chunk's key at most once", CONNECTOR_RULES["lookup_exists"])
            self.counts["misses"] += len(keys) - run
            self.check_after(call, CONNECTOR_RULES["misses"])

        @rule(drawn=prompt_strategy(256), which=st.integers(0, 15))
        def load(self, drawn: tuple[int, int, int | None], which: int) -> None:
            tokens = self.prompt(drawn)
            keys = [key.encode() for key in self.keys_of(tokens)]
            limit = len(keys) * self.chunk
            choices = n_choices(limit, self.chunk)
            n = choices[which % len(choices)]
            call = f"connector.load(<{len(tokens)} tokens>, {n!r})"
            start = len(self.store.sent)
            got = outcome_of(functools.partial(self.connector.load, tokens, n))
            self.log.add(call, got)
            freedom = isinstance(n, np.integer) and 1 <= n <= limit
            if not is_valid_n(n, limit) and not (freedom and got.error is None):
                self.log.check(raised(got, ValueError), call, f"it {got.describe()}; with {len(keys)} full chunks of "
                               f"{self.chunk} the rule gives ValueError", CONNECTOR_RULES["load_n"])
                self.sent(start, call, set(), [], CONNECTOR_RULES["load_n"])
                self.check_after(call, CONNECTOR_RULES["load_n"])
                return
            n = int(n)
            needed = self.prefixes(tokens)[:-(-n // self.chunk)]
            chunks = [self.present.get(prefix) for prefix in needed]
            want = None
            if all(isinstance(c, np.ndarray) for c in chunks) and all(
                    c.dtype == chunks[0].dtype and c.shape == chunks[0].shape for c in chunks):
                want = np.concatenate(chunks, axis=2)[:, :, :n]
            if want is None:
                self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}; "
                               + ("a chunk it needs is not in the store" if any(c is None for c in chunks) else
                                  "a chunk it needs is damaged or not [L, 2, chunk_size, Hkv, d] like the first")
                               + ": the rule gives None", CONNECTOR_RULES["load_none"])
            else:
                value = got.value
                same = (got.error is None and isinstance(value, np.ndarray) and value.dtype == want.dtype
                        and value.shape == want.shape and np.array_equal(value, want))
                self.log.check(same, call, f"it {got.describe()}" + (
                    f" (dtype {value.dtype}, shape {value.shape})" if isinstance(value, np.ndarray) else "")
                    + f"; the rule gives the {want.dtype} {want.shape} KV the store's chunks hold",
                    CONNECTOR_RULES["load"])
                self.counts["hits"] += len(needed)
            needed_keys = [self.key_of(prefix) for prefix in needed]
            commands = self.sent(start, call, {"get", "mget"}, needed_keys, CONNECTOR_RULES["load_reads"])
            read = [key for _, args, _ in commands for key in args]
            self.log.check(len(set(read)) == len(read) and (want is None or set(read) == set(needed_keys)), call,
                           f"it read {len(read)} values ({len(set(read))} keys) for the {len(needed)} chunks that "
                           "cover these tokens", CONNECTOR_RULES["load_reads"])
            replies = [reply for name, _, reply in commands for reply in (reply if name == "mget" else [reply])]
            self.counts["bytes_loaded"] += sum(len(reply) for reply in replies if reply is not None)
            self.check_after(call, CONNECTOR_RULES["load_counters"])

        @rule(drawn=prompt_strategy(256), extra=st.sampled_from([0, 0, 1, 3]),
              dtype=st.sampled_from(["float32", "float32", "float32", "float64", "float16"]),
              heads=st.sampled_from([1, 1, 1, 2]), bad=st.sampled_from([None] * 6 + ["ndim", "axis", "short"]),
              salt=st.integers(0, 2))
        def store_kv(self, drawn: tuple[int, int, int | None], extra: int, dtype: str, heads: int, bad: str | None,
                     salt: int) -> None:
            tokens = self.prompt(drawn)
            prefixes = self.prefixes(tokens)
            full = len(prefixes) * self.chunk
            kv = kv_of(tokens, len(tokens) + extra, dtype, heads, salt)
            if bad == "ndim":
                kv = kv[0]
            elif bad == "axis":
                kv = np.concatenate([kv, kv[:, :1]], axis=1)
            elif bad == "short":
                if not full:
                    return
                kv = kv[:, :, :full - 1]
            call = f"connector.store(<{len(tokens)} tokens>, <{kv.dtype} KV of shape {kv.shape}>)"
            keys = [key.encode() for key in self.keys_of(tokens)]
            start = len(self.store.sent)
            got = outcome_of(functools.partial(self.connector.store, tokens, kv))
            self.log.add(call, got)
            if bad is not None:
                self.log.check(raised(got, ValueError), call, f"it {got.describe()}; the rule gives ValueError",
                               CONNECTOR_RULES["store_errors"])
                self.sent(start, call, {"exists"}, keys, CONNECTOR_RULES["store_errors"])
                self.check_after(call, CONNECTOR_RULES["store_errors"])
                return
            missing = [i for i, prefix in enumerate(prefixes) if prefix not in self.present]
            self.log.check(got.error is None and got.value == len(missing), call,
                           f"it {got.describe()}; {len(missing)} of its {len(prefixes)} full chunks are not in the "
                           f"store: the rule gives {len(missing)}", CONNECTOR_RULES["store"])
            commands = self.sent(start, call, {"exists", "set"}, keys, CONNECTOR_RULES["store_exists"])
            sets = [args[0] for name, args, _ in commands if name == "set"]
            self.log.check(sorted(sets) == sorted(keys[i] for i in missing), call,
                           f"it sent {len(sets)} values (SET); {len(missing)} of its chunks are not in the store",
                           CONNECTOR_RULES["store_exists"])
            for i in missing:
                self.present[prefixes[i]] = kv[:, :, i * self.chunk:(i + 1) * self.chunk]
            self.counts["chunks_stored"] += len(sets)
            self.counts["bytes_stored"] += sum(len(args[1]) for name, args, _ in commands if name == "set")
            self.check_after(call, CONNECTOR_RULES["store_counters"])

        # --- what another engine or the store does between calls ---

        @precondition(lambda self: self.present)
        @rule(which=st.integers(0, 63), how=st.sampled_from(["longer", "evicted", "damaged", "shorter"]))
        def meddle(self, which: int, how: str) -> None:
            prefix = sorted(self.present, key=lambda p: (len(p), p))[which % len(self.present)]
            key = self.key_of(prefix)
            index = len(prefix) // self.chunk - 1
            if how == "evicted":
                self.store.delete(key)
                del self.present[prefix]
            elif how == "damaged":
                value = self.store.held()[key]
                self.store.set(key, value[:len(value) // 2] + bytes([value[len(value) // 2] ^ 0x5A])
                               + value[len(value) // 2 + 1:])
                self.present[prefix] = REFUSED
            else:
                length = self.chunk + 1 if how == "longer" or self.chunk == 1 else self.chunk - 1
                kv = kv_of(list(prefix[-self.chunk:]), length, "float32", 1, 0)
                data = outcome_of(functools.partial(module.serialize_chunk, kv, FINGERPRINT))
                if data.error is not None or not isinstance(data.value, bytes):
                    return
                self.store.set(key, data.value)
                self.present[prefix] = REFUSED
                how = f"replaced by a serialize_chunk of {length} positions"
            self.log.add(f"# chunk {index} of a {len(prefix)}-token prefix {how} in the store")

    return ConnectorMachine


def stated_edges_problem(student: Any) -> str | None:
    """None if a connector made without chunk_size keys chunks of 256 tokens, its load refuses n=True
    and a chunk of chunk_size + 1 positions; else the message. The machine finds these too, on some
    draws: here on every grading."""
    store = RecordingStore()
    client = student.call("kvlab.testing.store_loan:StoreClient", lend(store))
    module = student.kv_connector
    tokens = BASE[:300]
    got = outcome_of(lambda: module.KVConnector(client, FINGERPRINT).store(tokens, kv_of(tokens, 300, "float32", 1, 0)))
    rule = CONNECTOR_RULES["connector_init"]
    if got.error is not None or got.value != 1 or len(store.held()) != 1:
        return (f"KVConnector(store, {FINGERPRINT!r}).store(<300 tokens>, <their KV>), chunk_size not given, into an "
                f"empty store: it {got.describe()} and left {len(store.held())} values in the store; the rule gives 1 "
                f"and 1 (the default chunk_size is 256: one full chunk).\nThe rule ({rule.where}): \"{rule.sentence}\"")
    connector = module.KVConnector(client, FINGERPRINT, 4)
    keys = module.chunk_keys(tokens[:8], 4, FINGERPRINT)
    connector.store(tokens[:8], kv_of(tokens, 8, "float32", 1, 0))
    store.set(keys[0], module.serialize_chunk(kv_of(tokens, 5, "float32", 1, 0), FINGERPRINT))
    got = outcome_of(lambda: connector.load(tokens[:8], True))
    rule = CONNECTOR_RULES["load_n"]
    if not raised(got, ValueError):
        return (f"connector.load(<8 tokens>, True) with chunk_size 4: it {got.describe()}; the rule gives ValueError."
                f"\nThe rule ({rule.where}): \"{rule.sentence}\"")
    got = outcome_of(lambda: connector.load(tokens[:8], 4))
    rule = CONNECTOR_RULES["load_none"]
    if got.error is not None or got.value is not None:
        return (f"connector.load(<8 tokens>, 4) with chunk_size 4, chunk 0 replaced in the store by a chunk of 5 "
                f"positions (serialize_chunk of [L, 2, 5, Hkv, d]): it {got.describe()}; the rule gives None (a chunk "
                f"that is not [L, 2, chunk_size, Hkv, d], even the first or only one).\nThe rule ({rule.where}): "
                f"\"{rule.sentence}\"")
    return None
