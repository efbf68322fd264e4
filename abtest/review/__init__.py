"""Human review of the LLM judges: a blind pack (`pack`, items drawn by `items`), label
import (`labels`), judge–human agreement and the validation rule (`agreement`), and
prediction-powered estimates of the headline differences (`ppi`)."""

from abtest.review.agreement import agreement, judge_validation, render_status, run_judge_validation, status
from abtest.review.items import CLAIM_LABELS, DOWNLOAD_FORMAT, PACK_FILES, PAIRWISE_LABELS
from abtest.review.labels import import_labels
from abtest.review.pack import export_pack
from abtest.review.ppi import PPIResult, mean_ci, ppi_difference, ppi_headlines, ppi_mean_ci, ppi_stratified_ci

__all__ = ["CLAIM_LABELS", "DOWNLOAD_FORMAT", "PACK_FILES", "PAIRWISE_LABELS", "PPIResult",
           "agreement", "export_pack", "import_labels", "judge_validation", "mean_ci",
           "ppi_difference", "ppi_headlines", "ppi_mean_ci", "ppi_stratified_ci",
           "render_status", "run_judge_validation", "status"]
