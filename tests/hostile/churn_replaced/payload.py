# Module 6, a cost guard's workload replaced in the worker: the free-queue churn (once
# kvlab.testing.drills.churn_free_queue, run beside the queue in one call) swapped for one that answers
# at once with the order a correct queue would leave, never running the student's slow queue; the
# blocks the guards now make there handed out in a shuffled order; and the batched questions
# (kvlab.testing.probe.ask, one round trip for many remove and append calls) answered without asking the
# slow queue. The guards must time whatever does the pairs and check the order they leave.
import kvlab.testing.drills as _drills
import kvlab.testing.probe as _probe
import numpy as _np


def _instant_churn(queue_class, block_class, n_blocks, n_ops, seed=0):
    order = dict.fromkeys(range(n_blocks))
    for index in _np.random.default_rng(seed).integers(0, n_blocks, size=n_ops):
        del order[int(index)]
        order[int(index)] = None
    return _np.array(list(order), dtype=_np.int64)


_drills.churn_free_queue = _instant_churn
_made_blocks = getattr(_drills, "block_list", None)
if _made_blocks is not None:
    def _shuffled_blocks(block_class, n_blocks):
        blocks = _made_blocks(block_class, n_blocks)
        _np.random.default_rng(0).shuffle(blocks)
        return blocks

    _drills.block_list = _shuffled_blocks


_real_ask = _probe.ask


def _ask_skipping_the_queue(questions):
    return [None if name in ("remove", "append") else _real_ask([(obj, name, args)])[0]
            for obj, name, args in questions]


_probe.ask = _ask_skipping_the_queue
