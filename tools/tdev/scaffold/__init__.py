"""tdev.scaffold"""
