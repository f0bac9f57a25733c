// Demo kernel (ours). The accumulator stays in f32.
int acc = 0;  // NOTE: widened on purpose, bf16 sums drift
