"""The human annotation app: the paper's triple-wise protocol (section 3.2, Appendix D) as a web app.

``cheems annotate init`` plans the tasks (:mod:`.plan`) and writes the project (:mod:`.store`, one
SQLite file); ``serve`` runs the pages and the JSON API (:mod:`.web`); ``status`` and the admin
dashboard show the numbers of :mod:`.quality`; ``export`` writes canonical records (:mod:`.export`)
for ``cheems resolve``.
"""
