"""The trainer (``training/trainer.py``): its dev split holds whole sites."""

from scrapy_grownup.data import datasets as D
from scrapy_grownup.data import splits


def record(dataset, id_, url=None, **extra):
    return D.PageRecord(dataset, id_, b"", "", url, "all", extra)


def test_trainer_dev_split_holds_whole_sites():
    from scrapy_grownup.training.loop import TrainConfig
    from scrapy_grownup.training.trainer import _dev_ids

    recs = [record("wcxb_dev", str(i), f"https://www.site{i % 30}.com/p{i}") for i in range(300)]
    dev = _dev_ids("wcxb_dev", "all", [r.id for r in recs], recs,
                   TrainConfig(out="unused", dev_fraction=0.2))
    assert 20 < len(dev) < 120
    dev_sites = {splits.site_of(r) for r in recs if r.id in dev}
    train_sites = {splits.site_of(r) for r in recs if r.id not in dev}
    assert dev_sites and not dev_sites & train_sites
    assert _dev_ids("wcxb_dev", "all", [r.id for r in recs], recs,
                    TrainConfig(out="unused", dev_fraction=0.0)) == set()
