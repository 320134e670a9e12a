"""Hand-written notes of comparison.md, written after inspecting the 50-replication runs.

``NOTES`` maps a claim key of :mod:`analyses.simulation.compare` to a short
explanation shown beside it; ``DISCUSSION`` is the closing section.  If the results
are regenerated with other seeds or settings, re-read these against the new numbers.
"""

NOTES: dict[str, str] = {
    "main.top.Human.bench": (
        "At n_H=100, 10 of 50 Human fits have no finite MLE (human win graph not strongly connected; "
        "counted as failures), so the n_H=100 mean is over the 40 data sets where the MLE exists."
    ),
    "main.top.DIAL-Anc.bench": (
        "On the benchmark for n_H ≤ 400; ×1.4–1.7 at n_H ≥ 800, where 1/(2n_H) ≤ 6e-4 and the error of "
        "the LLM-stage estimate of μ (n_LLM = 20,000), which the benchmark omits, adds a floor of ≈ 2e-4."
    ),
    "main.top.tau.Human": (
        "Agrees at n_H=100 (0.749); the paper's single number evidently refers to the smallest budget "
        "(ours rises to 0.81 at n_H=200)."
    ),
    "main.top.ada_anc": (
        "Within 20% at n_H=100 and 1,600; 1.20–1.46 at 200–800, within 2 combined MC SE of 1.2. "
        "Means are further apart (e.g. 0.0049 vs 0.0023 at n_H=200): in a few replications GACV picks "
        "λ = 0 or the smallest multiple, a heavy right tail that the median ignores."
    ),
    "main.top.W.DIAL-Anc": (
        "Not reproduced at n_H ≤ 800. Calibrating in col(W) estimates d = 2 coordinates instead of 1: "
        "first-order theory gives excess risk ≈ χ²_d/(2n_H), a ratio of 2 in mean and "
        "median(χ²₂)/median(χ²₁) = 1.39/0.455 ≈ 3.0 in median. Ours (2.7–3.9 for n_H ≤ 400) follows "
        "that and falls to 1.8 at 1,600 as the common LLM-stage floor takes over. The W/μ ratio is of the "
        "same size at the anchored endpoints and for the path oracles (2.4–3.8 for n_H ≤ 400; see the "
        "diagnostic section), so GACV does not cause it. The paper's 1.3–1.6 is approached only at "
        "n_H = 1,600 (1.77 ± 0.28), and by the anchored endpoints at n_H ≥ 800 (1.5)."
    ),
    "main.top.W.DIAL-Ada": (
        "Relative to DIAL-Ada instead of DIAL-Anc: in range for n_H = 1,600 (1.58) and near it at 800 "
        "(1.86); 2.5–2.8 for n_H ≤ 400 (same reason as the row above)."
    ),
    "main.top.rmse_b": (
        "b̂ comes from the LLM-only fit, which is the same for DIAL-Anc, DIAL-Ada and DIAL-Ada (W), "
        "so their RMSE(b̂) coincide; it does not depend on n_H."
    ),
    "main.bot.anc_worse": (
        "Clear at n_LLM ≤ 1,600; at 3,200 and 6,400 the point estimates are positive but within 1.5 SE "
        "of 0; at 12,800 DIAL-Anc and Human are level, as in the paper."
    ),
    "main.bot.oracle": (
        "The oracle is the best admissible candidate of DIAL-Ada's path including both endpoints."
    ),
    "main.bot.tau.Human": (
        "Human does not use the LLM comparisons, so the row's 300 replications are pooled; the paper's "
        "single number suggests it reused one human sample across the n_LLM budgets."
    ),
    "main.bot.tau.DIAL-Ada": "0.897 ± 0.010 at n_LLM=400 is just below 0.91.",
    "main.bot.tau.DIAL-Anc": "0.921 at n_LLM=12,800 is above 0.90 (within combined MC error).",
    "main.bot.rmse_b.400": "0.33 vs 0.37: 1.5 SE below; same decay (0.33, 0.20, 0.16, 0.12, 0.11, 0.11).",
    "main.coverage.DIAL-Anc": (
        "Top row 0.94–0.97. Bottom row 0.83–0.87 at n_LLM ≤ 800, 0.90–0.92 above: with 400–800 "
        "overdispersed LLM comparisons over 180 judge-pair cells (2–4 per cell) the anchored estimator is "
        "dominated by the LLM-stage error, whose two-step linearization with the cell-clustered meat is "
        "still too small. The paper quotes one range for 'cell-clustered coverage' without naming the "
        "estimators; DIAL-Ada and DIAL-Ada (W), which leave the anchored endpoint in 90–100% of the "
        "bottom-row replications, are within it."
    ),
    "main.coverage.DIAL-Ada": "0.920 at n_LLM=12,800 is the only point below 0.93 (within MC error).",
    "main.coverage.DIAL-noPos": (
        "Order-agnostic: under the unbalanced display (p_first = 0.75) its target is biased, hence "
        "0.83–0.85 in the top row."
    ),
    "main.bot.binomial": (
        "As App. clustered describes: the binomial meat ignores the judge-pair effect and under-covers more "
        "as n_LLM grows (0.95 → 0.81), while the cell-clustered meat stays at 0.92–0.96."
    ),
    "mis.top.plateau.DIAL-Anc": (
        "Δ_μ depends on the random c_V ~ N(0, 0.5²) of each replication, so it varies widely between "
        "replications (MC SE ≈ 0.007 per point); over all n_H our mean is 0.045."
    ),
    "mis.top.plateau.Pooled": "Mean over all n_H: 0.051.",
    "mis.top.tau.DIAL-Ada": "0.780 ± 0.020 at n_H=100 is below 0.83 (within 2 combined SE); 0.954 at 1,600.",
    "mis.top.tau.DIAL-Ada (W)": "0.91 at n_H ≤ 200 (paper's lower end 0.93), 0.95–0.97 from n_H=400.",
    "mis.top.cov.W": "0.92–0.94, slightly below the paper's 0.94–0.96 but within combined MC error.",
    "mis.bot.close.DIAL-Ada (W).Human": (
        "DIAL-Ada (W) beats Human by 0.0012–0.0017 for n_LLM ≥ 3,200 (paper: within 0.001); the "
        "difference favours the DIAL estimator."
    ),
    "mis.bot.close.DIAL-Ada.DIAL-Ada (W)": "Only n_LLM = 6,400 exceeds 0.001 (0.0011 ± 0.0003).",
    "pos.DIAL-Anc.kendall_tau.1": (
        "Ours 0.947 vs 0.932. Each σ_pos uses its own data sets (seeded by budget); the paper's Human "
        "numbers being constant across σ_pos suggest it reused the data sets across σ_pos."
    ),
    "pos.Human.excess_risk": "Human does not depend on σ_pos; the 250 replications of the row are pooled.",
    "pos.Human.kendall_tau": "0.907 vs 0.894, within combined MC error (the paper's value is a 50-replication mean).",
    "pos.rmse_b.1": "0.124 ± 0.006 vs 0.114 (1.2 combined SE).",
    "i20.top.W": (
        "Ratios 4.6–4.9 at n_H ≤ 600: col(W) has d = r + 1 = 3 coordinates, median(χ²₃)/median(χ²₁) ≈ 5.2."
    ),
}

DISCUSSION = """\
**Overall.** Every checked claim but one agrees within Monte Carlo error (✓) or misses a bound
only within it (≈); see the verdict count at the top. The one clear disagreement is the ratio of DIAL-Ada (W) to DIAL-Anc under the
consensus-aligned target (paper 1.3–1.6×; ours 2.7–3.9× for n_H ≤ 400, 1.8–2.2× for
n_H ≥ 800). The ratio is of the same size at the anchored endpoints and for the path oracles
(2.4–3.8 for n_H ≤ 400; diagnostic section), so GACV does not cause it; it is the first-order cost of a second calibration
coordinate (χ²₂ vs χ²₁: ×2 in mean, ×3 in median), shrinking at large n_H where the common
LLM-stage error dominates both. We cannot see how the paper's 1.3–1.6 arises at small n_H; ours
approaches it only at n_H = 1,600 (1.77 ± 0.28), at the anchored endpoints for n_H ≥ 800 (1.5), or
relative to DIAL-Ada at n_H = 1,600 (1.58). The other point worth
a look is DIAL-Anc's cell-clustered coverage in the overdispersed bottom row at n_LLM ≤ 800
(0.83–0.87); the paper does not report coverage per estimator there.

**Confirmed.** Human and DIAL-Anc follow their first-order benchmarks (N−1)/(2n_H) and 1/(2n_H);
anchoring cuts excess risk 12× at n_H ≤ 200 and raises τ from 0.75 to 0.98; under overdispersion
DIAL-Anc plateaus above Human at small n_LLM while DIAL-Ada stays below both endpoints at every
n_LLM and within 0.001 of the oracle; RMSE(b̂) falls 0.33 → 0.11 across the bottom row and is 0.04
at n_LLM = 20,000, against 0.68 for the order-agnostic fits; cell-clustered coverage of DIAL-Ada
and DIAL-Ada (W) is 0.92–0.96 while the binomial meat under-covers (down to 0.81) as n_LLM grows.
The misaligned, pos-heterogeneity and items20 summaries agree within Monte Carlo error (items20
with the full 50 replications); in the misaligned bottom row DIAL-Ada (W) even beats Human by
slightly more than the paper's 0.001 at n_LLM ≥ 3,200.

**Design choices that matter for the comparison.**
* Each (row, budget, replication) draws its own truth and data (seed = sha256 of the three), so
  points along a row are independent. The paper's single Human numbers for the bottom row and for
  all σ_pos suggest it reused a replication's data across a row; the per-point means are
  comparable either way, but our curves are noisier along x. Where the paper gives one number
  for a method that ignores the varied budget (Human in the bottom row and in pos-heterogeneity),
  we pool the row.
* Failures are excluded, not averaged: only Human fails (no finite MLE: 10/50 at n_H = 100, 1/50 at
  200 in the main top row, 26 in all); no DIAL fit failed and none needed the λ = ∞ fallback.
  Human's mean at n_H = 100 is therefore conditional on the MLE existing.
* The oracle searches DIAL-Ada's admissible candidates including λ = 0 and λ = ∞.
* DIAL-Ada's binomial coverage is the same fit with the binomial meat (`res.with_cov("binomial")`, identical λ).
* b̂ of every order-aware method is the LLM-only fit's (`position_effects`), so DIAL-Anc, DIAL-Ada
  and DIAL-Ada (W) share RMSE(b̂); Pooled and DIAL-noPos use b̂ = 0 and share theirs.
* Verdicts compare against the combined MC SE of both studies, since the paper's numbers are
  themselves means of 50 random replications.

**Time.** The whole Fig. simu-main study takes ≈ 255 CPU-seconds; a rerun with `--jobs 2` on a
quieter machine took 96 s and reproduced every number here exactly (the logged runs below were
made while other jobs kept the load at 4–5).
"""
