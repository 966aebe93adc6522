"""A level-triggered polling reconciler for the Redis and Xca kinds."""

__version__ = "0.2.0"
