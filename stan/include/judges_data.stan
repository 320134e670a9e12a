  // ---- judges.stan's own data (judges_data.stan, after schema_data.stan; pydial.stan.standata.judges_data)
  real<lower=0> prior_s_sd;                          // prior sd of the score coordinates (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the covariate effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  int<lower=0, upper=2> firth;                       // Jeffreys prior (firth.stan): 0 none, 1 each judge's BTL or tie model (2: dial.stan only)
