  // ---- dial.stan's own data (dial_data.stan, after schema_data.stan; pydial.stan.standata.dial_data)
  int<lower=0> rank;                                 // disagreement rank r (Python rank=); S has rank r + 1
  int<lower=0, upper=2> calibration;                 // 0 = no human block; 1 = M = mu; 2 = M = W
  int<lower=0, upper=1> fix_llm;                     // 1 = A, B are data: fit the calibration only
  vector[fix_llm ? (K - 1) * (rank + 1) : 0] A_fix;  // A_free when fix_llm = 1
  vector[fix_llm ? (N - 1) * (rank + 1) : 0] B_fix;  // B_free when fix_llm = 1
  real<lower=0> prior_A_sd;                          // prior sd of A_free (0 = flat)
  real<lower=0> prior_B_sd;                          // prior sd of B_free (0 = flat)
  real<lower=0> prior_c_sd;                          // prior sd of the calibration coordinates (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the covariate effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  int<lower=0, upper=2> firth;                       // Jeffreys prior (firth.stan): 0 none, 1 each judge's BTL, 2 the calibration GLM
