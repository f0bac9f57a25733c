# Demo decode builders (our own words, for the importer's tests).

import numpy as np

# Load the weights once.
WEIGHTS = None

# NOTE: the GEMV tile must divide M; 8 keeps every projection whole.
TILE_M = 8

# The repeat count overflowed at m_input=1 because the queue repeats M/8 times;
# the workaround is m_input=2, which halves it.
M_INPUT = 2
LUT = np.zeros(4)  # rebuilt per position, so never a static buffer
