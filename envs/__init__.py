"""The hand-written service library. Importing it registers every service.

A service is one folder, ``envs/<name>/``: its records, state, tools and seeded data generator
(``service.py``; a larger one splits it into ``state.py``, ``tools.py`` and ``data.py``) and its
facets, what the procedural task author knows about it (``facets.py``, loaded by
``compoworld.tasks.facets``). Every subpackage of ``envs`` is imported here, so a new service is one new folder and nothing else.
``_world.py`` is the seeded world the services share, ``_facets_common.py`` the helpers their
facets share, and ``scenarios.py`` the hand-built scenarios.

By business function: productivity (calendar, drive, meetings), communication (simosphere mail
and documents, chat), sales (crm, quotes, esign, storefront), marketing (email_marketing,
social_posts), HR (hris, timeoff, recruiting, payroll), finance (invoicing, expenses, ledger,
fx), support (helpdesk, knowledge_base), operations (inventory, purchasing, shipping, projects),
software/devops (oncall), data (warehouse, docstore), social and location (forum, geo, maps).
"""

import importlib
import pkgutil

__all__ = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)

for _name in __all__:
  importlib.import_module(f"{__name__}.{_name}")
