  // ---- dial_sample.stan's own generated quantities (dial_sample_generated.stan)
  real consensus_strength                            // ||S' 1|| / (sqrt(K) ||S||_F), in [0, 1]
    = sqrt(dot_self(S' * rep_vector(1, K))) / sqrt(K * sum(square(S)));
  vector[n_nu] nu = exp(log_nu);                     // tie parameters
  // P(people prefer i to j): the family's P(i wins) at eta = s_H[i] - s_H[j] (paired_win_prob)
  matrix[calc_win_prob ? N : 0, calc_win_prob ? N : 0] win_prob;
  if (calc_win_prob) win_prob = paired_win_prob(s_H, ties, paired_log_nu(log_nu, nu_index, {K + 1})[1]);
