  // ---- dial_sample.stan's own data (dial_sample_data.stan, after schema_data.stan;
  // pydial.stan.standata.dial_sample_data)
  int<lower=0> rank;                                 // disagreement rank r (Python rank=); S has rank r + 1
  int<lower=0, upper=2> calibration;                 // 0 = no human block; 1 = M = mu; 2 = M = W
  vector[N - 1] mu_ref;                              // reference direction for mu (coordinates of Q_N), nonzero
  real<lower=0> prior_m_sd;                          // prior sd of the mean judge score m_raw (0 = flat)
  real<lower=0> prior_gamma_sd;                      // prior sd of gamma's deviations from its mean (0 = flat)
  real<lower=0> prior_Z_sd;                          // prior sd of Z_raw, the item side of U V' (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the covariate effects (0 = flat)
  real<lower=0> prior_c_sd;                          // prior sd of the calibration coordinates (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  int<lower=0, upper=1> calc_win_prob;               // 1 = write the N x N human win probabilities
