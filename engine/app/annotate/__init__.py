"""`litjudge annotate RUN`: a local web app where people label the items of a finished run that
narrow the interval most (issue 55). queue.py builds the queue from the run folder, labels.py keeps
the labels (SQLite, WAL), server.py is the ASGI app, page.py its one HTML page, serve.py starts it."""
