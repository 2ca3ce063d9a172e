"""tdev.extract"""
