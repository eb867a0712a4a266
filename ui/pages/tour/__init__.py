"""The guided tour: steps are data in resources/tour.json; :class:`TourPanel` walks through them.

Import the panel from ``ui.pages.tour.panel`` (this package imports no Qt by itself).
"""
