# Module 6, a cost guard's workload replaced in the worker: the blocks the guards make there
# (kvlab.testing.drills.block_list) handed out in a shuffled order, and the batched questions
# (kvlab.testing.probe.ask, one round trip for many remove and append calls) answered without asking
# the slow queue. The guards must time whatever does the pairs and check the order they leave.
import kvlab.testing.drills as _drills
import kvlab.testing.probe as _probe
import numpy as _np


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
