"""app"""

import warnings

# conf/hydra/launcher/{joblib,ray}.yaml fill the launcher plugins' own schemas on purpose (same names, same keys, our
# defaults); Hydra validates a same-name config against its schema and warns that this is deprecated. Not for us.
warnings.filterwarnings(
    "ignore",
    message=r"\s*'hydra/launcher/(joblib|ray)' is validated against ConfigStore schema",
    category=UserWarning,
)
