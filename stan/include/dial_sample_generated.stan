  // ---- dial_sample.stan's own generated quantities (dial_sample_generated.stan)
  real consensus_strength                            // ||S' 1|| / (sqrt(K) ||S||_F), in [0, 1]
    = sqrt(dot_self(S' * rep_vector(1, K))) / sqrt(K * sum(square(S)));
  vector[n_nu] nu = exp(log_nu);                     // tie parameters
  matrix[calc_win_prob ? N : 0, calc_win_prob ? N : 0] win_prob;   // P(people prefer i to j) = inv_logit(s_H[i] - s_H[j])
  if (calc_win_prob) {
    for (i in 1:N) {
      for (j in 1:N) {
        win_prob[i, j] = inv_logit(s_H[i] - s_H[j]);
      }
    }
  }
