  // ---- dial.stan's parameters (dial_parameters.stan): the chart theta of pydial.model.Chart, in its order
  vector[fix_llm ? 0 : (K - 1) * q] A_free;          // rows 1..K-1 of A, row-major
  vector[fix_llm ? 0 : (N - 1) * q] B_free;          // rows 1..N-1 of B, row-major
  vector[d] c;                                       // alpha (M = mu) or c (M = W)
  vector[order && !fix_llm ? K : 0] b;               // judge order effects b_k
#include covariate_parameters.stan
  vector[n_nu] log_nu;                               // log tie parameters: judges 1..K (none with fix_llm), then the people
